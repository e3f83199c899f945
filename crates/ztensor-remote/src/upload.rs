//! Writing an object as it is produced: a [`std::io::Write`] that streams a multipart upload
//! and publishes the object only when [`RemoteUpload::finish`] completes it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use tokio::task::JoinSet;

use crate::counters::{Counters, Transfer};
use crate::error::{Error, ErrorKind};
use crate::location::Location;
use crate::store::{self, RemoteOptions};

/// The size of each part but the last (S3 takes parts of 5 MiB to 5 GiB).
pub const PART_LEN: usize = 8 << 20;
/// Parts in flight at once by default ([`RemoteOptions::upload_parts`]); with [`PART_LEN`], the
/// memory an upload holds (64 MiB and the part being filled).
pub const PARALLEL_PARTS: usize = 8;
/// How long [`abort_unfinished`] waits for each abort. A server still taking the parts in
/// flight answers the abort after them: 10 s left an upload behind on a loaded local server
/// (the interrupt test failed once in CI), and an interrupted user is better served by a
/// longer wait than by parts left to bill.
const ABORT_PATIENCE: Duration = Duration::from_secs(30);

/// An object being written. Bytes are buffered into parts of [`PART_LEN`]; the first full part
/// starts a multipart upload, and parts go up as they fill, at most
/// [`RemoteOptions::upload_parts`] at once.
/// An output smaller than one part goes up in one PUT at [`finish`](RemoteUpload::finish).
/// Nothing is visible at the URL until `finish` succeeds; an upload dropped (or
/// [`abort`](RemoteUpload::abort)ed) before it is aborted, its parts deleted, and a process
/// that is stopped by a signal aborts the uploads it has running with [`abort_unfinished`].
#[derive(Debug)]
pub struct RemoteUpload {
    shown: String,
    stores: store::Stores,
    path: object_store::path::Path,
    options: RemoteOptions,
    counters: Arc<Counters>,
    buffer: Vec<u8>,
    multipart: Option<Multipart>,
    written: u64,
}

/// A multipart upload under way.
struct Multipart {
    store: Arc<dyn MultipartStore>,
    id: MultipartId,
    /// Its entry in [`LIVE`].
    token: u64,
    /// The ETag of the object the URL held when the upload began, if any: a completion whose
    /// answer was lost is known to have succeeded when the object there is no longer that one.
    prior: Option<Option<String>>,
    tasks: JoinSet<object_store::Result<(usize, PartId)>>,
    parts: Vec<(usize, PartId)>,
    next: usize,
}

impl std::fmt::Debug for Multipart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Multipart")
            .field("parts", &self.next)
            .field("in_flight", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

/// A running upload, as [`abort_unfinished`] finds it.
struct Live {
    token: u64,
    store: Arc<dyn MultipartStore>,
    path: object_store::path::Path,
    id: MultipartId,
    shown: String,
    /// Its completing request is sent (or about to be): [`abort_unfinished`] waits for its
    /// answer rather than abort an upload that may have landed.
    completing: bool,
    /// Its part uploads, which [`abort_unfinished`] cancels before the abort is sent, so that
    /// no part is still being received by the server when the upload is aborted.
    parts: Vec<tokio::task::AbortHandle>,
}

/// Every multipart upload of this process begun and neither completed nor aborted.
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());
static TOKENS: AtomicU64 = AtomicU64::new(0);
/// Multipart uploads being started: asked of the server, not yet in [`LIVE`]. What
/// [`abort_unfinished`] waits for, so that an upload the server made just as a signal came is
/// aborted too.
static STARTING: AtomicUsize = AtomicUsize::new(0);
/// Set by [`abort_unfinished`]: no upload starts after it.
static STOPPING: AtomicBool = AtomicBool::new(false);
/// Aborts under way outside [`abort_unfinished`] (an upload dropped on an error, which the
/// signal may have caused): waited for too, so that the process does not exit in the middle of
/// one.
static ABORTING: AtomicUsize = AtomicUsize::new(0);

/// Objects published on probation ([`Provisional`]): what [`abort_unfinished`] deletes.
static PROVISIONAL: Mutex<Vec<Held>> = Mutex::new(Vec::new());

/// An object held by a [`Provisional`].
struct Held {
    token: u64,
    location: Location,
    options: RemoteOptions,
}

/// Objects a write publishes one by one and that stand only together: the shards of a sharded
/// checkpoint and its index. Each is held (before it is published) until the write is done
/// and this is dropped; a process stopped by a signal first deletes every object still held
/// ([`abort_unfinished`]), so an interrupted write leaves none of them behind. (A write that
/// fails without a signal removes what it published itself.)
#[derive(Debug)]
pub struct Provisional {
    token: u64,
}

impl Provisional {
    /// A new, empty set.
    pub fn new() -> Provisional {
        Provisional { token: TOKENS.fetch_add(1, Ordering::SeqCst) }
    }

    /// Holds the object at `location`, about to be published.
    pub fn hold(&self, location: &Location, options: &RemoteOptions) {
        undone_on_interrupt();
        PROVISIONAL.lock().unwrap_or_else(PoisonError::into_inner).push(Held {
            token: self.token,
            location: location.clone(),
            options: options.clone(),
        });
    }

    /// Lets go of the object at `location` again: its publication failed, so whatever is
    /// there is not this write's and a signal must not delete it. Once a signal's cleanup
    /// has begun ([`abort_unfinished`]) the hold stays: the publication may have failed
    /// because of the cleanup after its object landed, and the cleanup deletes it.
    pub fn release(&self, location: &Location) {
        if STOPPING.load(Ordering::SeqCst) {
            return;
        }
        let mut held = PROVISIONAL.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) =
            held.iter().rposition(|h| h.token == self.token && h.location == *location)
        {
            held.remove(at);
        }
    }
}

impl Default for Provisional {
    fn default() -> Provisional {
        Provisional::new()
    }
}

/// The write is over: its objects are no longer deleted by a signal.
impl Drop for Provisional {
    fn drop(&mut self) {
        PROVISIONAL
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|h| h.token != self.token);
    }
}

/// One upload being started, counted in [`STARTING`] until it is dropped.
struct Starting;

impl Starting {
    /// Counts an upload starting, or `None` once [`abort_unfinished`] has begun.
    fn begin() -> Option<Starting> {
        undone_on_interrupt();
        STARTING.fetch_add(1, Ordering::SeqCst);
        if STOPPING.load(Ordering::SeqCst) {
            STARTING.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Starting)
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        STARTING.fetch_sub(1, Ordering::SeqCst);
    }
}

fn forget(token: u64) {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner).retain(|l| l.token != token);
}

/// Marks the upload of `token` as completing, or says no (false) once [`abort_unfinished`] has
/// begun: then it must not complete. One lock decides both, so a signal's cleanup either sees
/// the completion under way and waits for it, or the completion sees the cleanup and stops.
fn begin_completing(token: u64) -> bool {
    let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    if STOPPING.load(Ordering::SeqCst) {
        return false;
    }
    for l in live.iter_mut().filter(|l| l.token == token) {
        l.completing = true;
    }
    true
}

/// Adds [`abort_unfinished`] to what [`ztensor_source::interrupt`] undoes: before an upload
/// starts or an object is held, so a signal's cleanup never misses one.
fn undone_on_interrupt() {
    ztensor_source::on_interrupt("uploads to object storage", abort_unfinished);
}

/// Aborts every multipart upload this process has running (for a signal handler about to
/// exit: SIGINT or SIGTERM must leave no parts behind), waiting up to 10 s for each, and
/// deletes the objects [`Provisional`] sets still hold (once the uploads in flight ended, so
/// none appears after); returns the URLs of the uploads whose abort and the objects whose
/// deletion failed. An upload whose completing request was sent before the signal is not
/// aborted: its answer is waited for (within the same patience), so what it says is what
/// happened (the object landed, or the upload was aborted after its completion failed).
pub fn abort_unfinished() -> Vec<String> {
    // No upload starts or completes from now on; those being started or completed are waited
    // for (within the patience), so that one the server made just now is found and aborted,
    // and one that landed just now is not reported as an abort that failed.
    STOPPING.store(true, Ordering::SeqCst);
    let since = std::time::Instant::now();
    let busy = || {
        STARTING.load(Ordering::SeqCst) > 0
            || ABORTING.load(Ordering::SeqCst) > 0
            || LIVE.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|l| l.completing)
    };
    while busy() && since.elapsed() < ABORT_PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    let live: Vec<Live> = std::mem::take(&mut *LIVE.lock().unwrap_or_else(PoisonError::into_inner));
    let mut failed = Vec::new();
    for l in &live {
        // The parts in flight stop first: a part the server still receives when the upload
        // is aborted may land after it (S3 says an abort may have to be repeated then).
        for part in &l.parts {
            part.abort();
        }
    }
    for l in live {
        let aborted = store::block_on(&l.shown, "aborting the upload", ABORT_PATIENCE, async {
            l.store
                .abort_multipart(&l.path, &l.id)
                .await
                .map_err(|e| Error::from_store("aborting the upload", &l.shown, e))
        });
        if aborted.is_err() {
            failed.push(l.shown);
        }
    }
    let held: Vec<Held> =
        std::mem::take(&mut *PROVISIONAL.lock().unwrap_or_else(PoisonError::into_inner));
    for h in held {
        if delete_within(&h.location, &h.options, ABORT_PATIENCE).is_err() {
            failed.push(h.location.to_string());
        }
    }
    failed
}

impl RemoteUpload {
    /// Begins writing the object at `location` (nothing is sent until a part fills or
    /// [`finish`](RemoteUpload::finish)).
    ///
    /// # Errors
    /// [`ErrorKind::ReadOnly`] for `http://` and `https://`; the client's configuration error.
    pub fn create(location: &Location, options: &RemoteOptions) -> Result<RemoteUpload, Error> {
        let shown = location.to_string();
        if !location.scheme().writable() {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                shown,
                "writing: http:// and https:// are read only; write to s3://, gs:// or az://",
            ));
        }
        let counters = Arc::new(Counters::default());
        let stores = store::store(location, options, &counters)?;
        let path = location.store_path()?;
        Ok(RemoteUpload {
            shown,
            stores,
            path,
            options: options.clone(),
            counters,
            buffer: Vec::new(),
            multipart: None,
            written: 0,
        })
    }

    /// The bytes written to it so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The requests sent so far.
    pub fn transfer(&self) -> Transfer {
        self.counters.get()
    }

    /// Starts the multipart upload.
    fn start(&self) -> Result<Multipart, Error> {
        let (shown, path) = (&self.shown, &self.path);
        let Some(store) = self.stores.multipart.clone() else {
            return Err(Error::new(ErrorKind::ReadOnly, shown, "writing: no multipart uploads"));
        };
        let object = &self.stores.object;
        let Some(starting) = Starting::begin() else {
            return Err(Error::new(ErrorKind::Request, shown, "writing: the process is stopping"));
        };
        let (id, prior) =
            store::block_on(shown, "starting the upload", self.options.timeout, async {
                let prior = object.head(path).await.ok().map(|meta| meta.e_tag);
                let id = store
                    .create_multipart(path)
                    .await
                    .map_err(|e| Error::from_store("starting the upload", shown, e))?;
                Ok((id, prior))
            })?;
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        LIVE.lock().unwrap_or_else(PoisonError::into_inner).push(Live {
            token,
            store: Arc::clone(&store),
            path: path.clone(),
            id: id.clone(),
            shown: shown.clone(),
            completing: false,
            parts: Vec::new(),
        });
        drop(starting);
        Ok(Multipart { store, id, token, prior, tasks: JoinSet::new(), parts: Vec::new(), next: 0 })
    }

    /// Sends the buffer as the next part (starting the multipart upload first if needed), and
    /// waits while [`RemoteOptions::upload_parts`] are in flight.
    fn send_part(&mut self) -> Result<(), Error> {
        if self.multipart.is_none() {
            self.multipart = Some(self.start()?);
        }
        let part = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
        let Some(multipart) = self.multipart.as_mut() else { unreachable!("started above") };
        multipart.spawn(&self.path, part);
        let shown = &self.shown;
        let most = self.options.upload_parts.max(1);
        store::block_on(shown, "uploading a part", self.options.timeout, async {
            while multipart.tasks.len() >= most {
                multipart.joined(shown).await?;
            }
            Ok(())
        })
    }

    /// Completes the upload: the object appears whole at its URL. When the answer to the
    /// completing request is lost, the object is looked up: a new object there with the bytes
    /// written means the upload succeeded.
    ///
    /// # Errors
    /// Any part's or the completion's error (the upload is then aborted).
    pub fn finish(self) -> Result<Transfer, Error> {
        self.finish_when(None)
    }

    /// Publishes the object as [`finish`](RemoteUpload::finish) does, only when the URL still
    /// holds what `expected` says (nothing, or the object of an ETag seen before): a
    /// conditional PUT (`If-None-Match: *` or `If-Match` on S3 and Azure, a generation match on
    /// GCS), so that of two writers racing to one URL, the second learns it lost rather than
    /// replacing the first's object. For objects of one part (a receipt, an index): at most
    /// [`PART_LEN`] bytes.
    ///
    /// # Errors
    /// [`ErrorKind::Changed`] when the URL holds something else (nothing is published then);
    /// [`ErrorKind::Config`] for an object past one part, or a store that has no conditional
    /// writes; the request's error.
    pub fn finish_if(self, expected: Expected) -> Result<Transfer, Error> {
        self.finish_when(Some(expected))
    }

    fn finish_when(mut self, expected: Option<Expected>) -> Result<Transfer, Error> {
        let (shown, path) = (self.shown.clone(), self.path.clone());
        let object = Arc::clone(&self.stores.object);
        if expected.is_some() && self.multipart.is_some() {
            return Err(Error::new(
                ErrorKind::Config,
                shown,
                format!("publishing: a conditional write is of one part, at most {PART_LEN} bytes"),
            ));
        }
        let Some(mut multipart) = self.multipart.take() else {
            // A single PUT: counted while it runs, so a signal's [`abort_unfinished`] waits for
            // it before deleting what it holds; none starts after.
            let Some(_starting) = Starting::begin() else {
                return Err(Error::new(ErrorKind::Request, shown, "writing: interrupted"));
            };
            return self.put_whole(&object, &path, expected);
        };
        if !self.buffer.is_empty() {
            let part = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
            multipart.spawn(&path, part);
        }
        let written = self.written;
        let timeout = self.options.timeout;
        let completed = store::block_on(&shown, "completing the upload", timeout, async {
            while !multipart.tasks.is_empty() {
                multipart.joined(&shown).await?;
            }
            multipart.parts.sort_by_key(|(i, _)| *i);
            let parts = multipart.parts.iter().map(|(_, p)| p.clone()).collect();
            if !begin_completing(multipart.token) {
                return Err(Error::new(ErrorKind::Request, &shown, "writing: interrupted"));
            }
            match multipart.store.complete_multipart(&path, &multipart.id, parts).await {
                Ok(_) => Ok(()),
                Err(e) => match object.head(&path).await {
                    // A new object is there, of the length written: the answer was lost, not
                    // the completion.
                    Ok(meta)
                        if meta.size == written
                            && Some(&meta.e_tag) != multipart.prior.as_ref() =>
                    {
                        Ok(())
                    }
                    _ => Err(Error::from_store("completing the upload", &shown, e)),
                },
            }
        });
        match completed {
            Ok(()) => {
                forget(multipart.token);
                Ok(self.counters.get())
            }
            Err(e) => {
                // The completion's error is the one to report; a failed abort leaves parts for
                // the bucket's lifecycle rule.
                let _ = multipart.abort(&shown, &path, timeout);
                Err(e)
            }
        }
    }

    /// The object in one PUT (all of it is in the buffer), on condition when `expected` says.
    fn put_whole(
        &mut self,
        object: &Arc<dyn object_store::ObjectStore>,
        path: &object_store::path::Path,
        expected: Option<Expected>,
    ) -> Result<Transfer, Error> {
        let shown = &self.shown;
        let payload = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
        let mode = match expected {
            None => object_store::PutMode::Overwrite,
            Some(Expected::Nothing) => object_store::PutMode::Create,
            Some(Expected::Object(e_tag)) => {
                object_store::PutMode::Update(object_store::UpdateVersion {
                    e_tag: Some(e_tag),
                    version: None,
                })
            }
        };
        store::block_on(shown, "writing", self.options.timeout, async {
            match object.put_opts(path, payload, mode.into()).await {
                Ok(_) => Ok(()),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotModified { .. },
                ) => Err(Error::new(
                    ErrorKind::Changed,
                    shown,
                    "publishing: another writer published there first (the object is not the \
                     one this write expected); nothing was written",
                )),
                Err(e @ object_store::Error::NotImplemented { .. }) => Err(Error::new(
                    ErrorKind::Config,
                    shown,
                    format!("publishing: this store has no conditional writes ({e})"),
                )),
                Err(e) => Err(Error::from_store("writing", shown, e)),
            }
        })?;
        Ok(self.counters.get())
    }

    /// Gives the upload up: parts sent are deleted, nothing appears at the URL. What dropping
    /// an unfinished upload does.
    ///
    /// # Errors
    /// The abort request's error (parts may then remain until the bucket's lifecycle rule
    /// removes them).
    pub fn abort(mut self) -> Result<(), Error> {
        match self.multipart.take() {
            Some(multipart) => multipart.abort(&self.shown, &self.path, self.options.timeout),
            None => Ok(()),
        }
    }
}

impl Multipart {
    /// Sends `part` as the next part, in a task of its own.
    fn spawn(&mut self, path: &object_store::path::Path, part: PutPayload) {
        let (store, path, id, index) =
            (Arc::clone(&self.store), path.clone(), self.id.clone(), self.next);
        self.next += 1;
        let _runtime = store::enter();
        let handle = self.tasks.spawn(async move {
            store.put_part(&path, &id, index, part).await.map(|p| (index, p))
        });
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = live.iter_mut().find(|l| l.token == self.token) {
            // Those already done are let go of as they pile up.
            l.parts.retain(|h| !h.is_finished());
            l.parts.push(handle);
        }
    }

    /// Waits for one part task to end, keeping its part.
    async fn joined(&mut self, shown: &str) -> Result<(), Error> {
        match self.tasks.join_next().await {
            None => Ok(()),
            Some(Ok(Ok(part))) => {
                self.parts.push(part);
                Ok(())
            }
            Some(Ok(Err(e))) => Err(Error::from_store("uploading a part", shown, e)),
            Some(Err(e)) => {
                Err(Error::new(ErrorKind::Request, shown, format!("uploading a part: {e}")))
            }
        }
    }

    /// Stops the parts in flight and aborts the upload.
    fn abort(
        mut self,
        shown: &str,
        path: &object_store::path::Path,
        timeout: Duration,
    ) -> Result<(), Error> {
        // Counted before it leaves [`LIVE`], so that a signal's [`abort_unfinished`] always
        // sees it one way or the other.
        ABORTING.fetch_add(1, Ordering::SeqCst);
        forget(self.token);
        let aborted = store::block_on(shown, "aborting the upload", timeout, async {
            self.tasks.shutdown().await;
            self.store
                .abort_multipart(path, &self.id)
                .await
                .map_err(|e| Error::from_store("aborting the upload", shown, e))
        });
        ABORTING.fetch_sub(1, Ordering::SeqCst);
        aborted
    }
}

impl io::Write for RemoteUpload {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            if self.buffer.capacity() == 0 {
                self.buffer.reserve_exact(PART_LEN);
            }
            let take = buf.len().min(PART_LEN - self.buffer.len());
            self.buffer.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.buffer.len() == PART_LEN {
                self.send_part()?;
            }
        }
        self.written += n as u64;
        Ok(n)
    }

    /// Nothing to do: parts go up as they fill, the rest at [`RemoteUpload::finish`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RemoteUpload {
    fn drop(&mut self) {
        if let Some(multipart) = self.multipart.take() {
            // Best effort: an abort that fails leaves parts for the bucket's lifecycle rule.
            let _ = multipart.abort(&self.shown, &self.path, self.options.timeout);
        }
    }
}

/// What [`RemoteUpload::finish_if`] expects at the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expected {
    /// Nothing: the object is created, never put over another.
    Nothing,
    /// The object of this ETag ([`seen`] gives it): replaced only while it is still there.
    Object(String),
}

/// What the URL at `location` holds now, for a later [`RemoteUpload::finish_if`]: the ETag of
/// its object, or [`Expected::Nothing`]. One HEAD request.
///
/// # Errors
/// The request's error, other than the object not being there.
pub fn seen(location: &Location, options: &RemoteOptions) -> Result<Expected, Error> {
    let shown = location.to_string();
    let counters = Arc::new(Counters::default());
    let stores = store::store(location, options, &counters)?;
    let path = location.store_path()?;
    store::block_on(&shown, "looking", options.timeout, async {
        match stores.object.head(&path).await {
            Ok(meta) => match meta.e_tag {
                Some(e_tag) => Ok(Expected::Object(e_tag)),
                None => Err(Error::new(
                    ErrorKind::Config,
                    &shown,
                    "looking: the store gave no ETag, so nothing can be written on condition",
                )),
            },
            Err(object_store::Error::NotFound { .. }) => Ok(Expected::Nothing),
            Err(e) => Err(Error::from_store("looking", &shown, e)),
        }
    })
}

/// Deletes the object at `location` (a shard written before its checkpoint failed, say). An
/// object that is not there is no error: what was asked holds.
///
/// # Errors
/// [`ErrorKind::ReadOnly`] for `http://` and `https://`; the request's error.
pub fn delete(location: &Location, options: &RemoteOptions) -> Result<(), Error> {
    delete_within(location, options, options.timeout)
}

/// [`delete`], within `patience`.
fn delete_within(
    location: &Location,
    options: &RemoteOptions,
    patience: Duration,
) -> Result<(), Error> {
    let shown = location.to_string();
    if !location.scheme().writable() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            shown,
            "deleting: http:// and https:// are read only",
        ));
    }
    let counters = Arc::new(Counters::default());
    let stores = store::store(location, options, &counters)?;
    let path = location.store_path()?;
    store::block_on(&shown, "deleting", patience, async {
        match stores.object.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::from_store("deleting", &shown, e)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The locations `set` holds now.
    fn holding(set: &Provisional) -> Vec<String> {
        let held = PROVISIONAL.lock().unwrap_or_else(PoisonError::into_inner);
        held.iter().filter(|h| h.token == set.token).map(|h| h.location.to_string()).collect()
    }

    #[test]
    fn a_release_lets_go_of_that_object_alone() {
        let options = RemoteOptions::default();
        let (a, b) = (
            Location::parse("s3://bucket/out/a.zt").unwrap(),
            Location::parse("s3://bucket/out/b.zt").unwrap(),
        );
        let set = Provisional::new();
        let other = Provisional::new();
        set.hold(&a, &options);
        set.hold(&b, &options);
        other.hold(&a, &options);
        set.release(&a);
        assert_eq!(holding(&set), ["s3://bucket/out/b.zt"]);
        // Another write's hold on the same name stays.
        assert_eq!(holding(&other), ["s3://bucket/out/a.zt"]);
        // Releasing what is not held changes nothing.
        set.release(&a);
        assert_eq!(holding(&set), ["s3://bucket/out/b.zt"]);
        drop(set);
        assert_eq!(holding(&other), ["s3://bucket/out/a.zt"]);
        drop(other);
        let left = PROVISIONAL.lock().unwrap_or_else(PoisonError::into_inner).len();
        assert_eq!(left, 0);
    }
}
