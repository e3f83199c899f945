//! Writing an object as it is produced: a [`std::io::Write`] that streams a multipart upload
//! and publishes the object only when [`RemoteUpload::finish`] completes it.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use tokio::task::JoinSet;

use crate::error::{Error, ErrorKind};
use crate::location::Location;
use crate::store::{self, Counters, RemoteOptions, Transfer};

/// The size of each part but the last (S3 takes parts of 5 MiB to 5 GiB).
pub const PART_LEN: usize = 8 << 20;
/// Parts in flight at once; with [`PART_LEN`], the memory an upload holds (64 MiB and the
/// part being filled).
pub const PARALLEL_PARTS: usize = 8;

/// An object being written. Bytes are buffered into parts of [`PART_LEN`]; the first full part
/// starts a multipart upload, and parts go up as they fill, at most [`PARALLEL_PARTS`] at once.
/// An output smaller than one part goes up in one PUT at [`finish`](RemoteUpload::finish).
/// Nothing is visible at the URL until `finish` succeeds; an upload dropped (or
/// [`abort`](RemoteUpload::abort)ed) before it is aborted, its parts deleted.
#[derive(Debug)]
pub struct RemoteUpload {
    shown: String,
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    options: RemoteOptions,
    counters: Arc<Counters>,
    buffer: Vec<u8>,
    multipart: Option<Multipart>,
    written: u64,
}

struct Multipart {
    upload: Box<dyn MultipartUpload>,
    /// The ETag of the object the URL held when the upload began, if any: a completion whose
    /// answer was lost is known to have succeeded when the object there is no longer that one.
    prior: Option<Option<String>>,
    tasks: JoinSet<object_store::Result<()>>,
}

impl std::fmt::Debug for Multipart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Multipart").field("in_flight", &self.tasks.len()).finish_non_exhaustive()
    }
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
        let store = store::store(location, options, &counters)?;
        let path = location.store_path()?;
        Ok(RemoteUpload {
            shown,
            store,
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

    /// Sends the full part in the buffer, starting the multipart upload first if needed, and
    /// waits while [`PARALLEL_PARTS`] are in flight.
    fn send_part(&mut self) -> Result<(), Error> {
        let part = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
        let (store, path, shown) = (&self.store, &self.path, &self.shown);
        if self.multipart.is_none() {
            let (upload, prior) =
                store::block_on(shown, "starting the upload", self.options.timeout, async {
                    let prior = store.head(path).await.ok().map(|meta| meta.e_tag);
                    let upload = store
                        .put_multipart(path)
                        .await
                        .map_err(|e| Error::from_store("starting the upload", shown, e))?;
                    Ok((upload, prior))
                })?;
            self.multipart = Some(Multipart { upload, prior, tasks: JoinSet::new() });
        }
        let Some(multipart) = self.multipart.as_mut() else { unreachable!("started above") };
        {
            let _runtime = store::enter();
            multipart.tasks.spawn(multipart.upload.put_part(part));
        }
        let tasks = &mut multipart.tasks;
        store::block_on(shown, "uploading a part", self.options.timeout, async {
            while tasks.len() >= PARALLEL_PARTS {
                joined(shown, tasks.join_next().await)?;
            }
            Ok(())
        })
    }

    /// Completes the upload: the object appears whole at its URL. When the answer to the
    /// completing request is lost, the object is looked up: present with the bytes written,
    /// the upload succeeded.
    ///
    /// # Errors
    /// Any part's or the completion's error (the upload is then aborted).
    pub fn finish(mut self) -> Result<Transfer, Error> {
        let (store, path, shown) = (Arc::clone(&self.store), self.path.clone(), self.shown.clone());
        let Some(mut multipart) = self.multipart.take() else {
            let payload = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
            store::block_on(&shown, "writing", self.options.timeout, async {
                store.put(&path, payload).await.map_err(|e| Error::from_store("writing", &shown, e))
            })?;
            return Ok(self.counters.get());
        };
        if !self.buffer.is_empty() {
            let part = PutPayload::from(Bytes::from(std::mem::take(&mut self.buffer)));
            let _runtime = store::enter();
            multipart.tasks.spawn(multipart.upload.put_part(part));
        }
        let written = self.written;
        let timeout = self.options.timeout;
        let completed = store::block_on(&shown, "completing the upload", timeout, async {
            while let Some(done) = multipart.tasks.join_next().await {
                joined(&shown, Some(done))?;
            }
            match multipart.upload.complete().await {
                Ok(_) => Ok(()),
                Err(e) => match store.head(&path).await {
                    // A new object is there, of the length written: the answer was lost, not the
                    // completion.
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
        if let Err(e) = completed {
            // The completion's error is the one to report; a failed abort leaves parts for
            // the bucket's lifecycle rule.
            let _ = abort(&shown, multipart, timeout);
            return Err(e);
        }
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
            Some(multipart) => abort(&self.shown, multipart, self.options.timeout),
            None => Ok(()),
        }
    }
}

/// Stops the parts in flight and aborts the upload.
fn abort(shown: &str, mut multipart: Multipart, timeout: std::time::Duration) -> Result<(), Error> {
    store::block_on(shown, "aborting the upload", timeout, async {
        multipart.tasks.shutdown().await;
        multipart
            .upload
            .abort()
            .await
            .map_err(|e| Error::from_store("aborting the upload", shown, e))
    })
}

/// A finished part task's outcome as ours.
fn joined(
    shown: &str,
    done: Option<Result<object_store::Result<()>, tokio::task::JoinError>>,
) -> Result<(), Error> {
    match done {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(e))) => Err(Error::from_store("uploading a part", shown, e)),
        Some(Err(e)) => {
            Err(Error::new(ErrorKind::Request, shown, format!("uploading a part: {e}")))
        }
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
            let _ = abort(&self.shown, multipart, self.options.timeout);
        }
    }
}
