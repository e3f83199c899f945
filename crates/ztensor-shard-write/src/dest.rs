//! Where a sharded checkpoint goes: a [`Destination`], one set of writing functions for every
//! place. A local directory is a [`Directory`]; a prefix in object storage is the command-line
//! tool's, over `ztensor-remote`; tests keep objects in memory.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ztensor_io::{FileSource, FileWriter, OutputDir, ReadAt};
use ztensor_shard::{Error, Result};

use crate::outdir::Undo;

/// Where the objects of a sharded output go: a directory, a prefix in a bucket, each object
/// made by a write that makes nothing appear until it is published. Names are an object's
/// name under the destination (a receipt's is `RECEIPTS_DIR/unit-N.json`).
pub trait Destination {
    /// An object being written.
    type Object: std::io::Write;

    /// Where the object `name` goes, as messages show it.
    fn locate(&self, name: &str) -> String;

    /// Begins writing the object `name`: nothing appears there yet.
    ///
    /// # Errors
    /// The destination's own (a malformed URL, refused credentials, a link planted there).
    fn create(&self, name: &str) -> std::io::Result<Self::Object>;

    /// Makes `object` appear whole at `name` (replacing what was there).
    ///
    /// # Errors
    /// The destination's own; nothing appears then.
    fn publish(&self, name: &str, object: Self::Object) -> std::io::Result<()>;

    /// Removes the object `name`, which this write published before it failed.
    ///
    /// # Errors
    /// The destination's own.
    fn remove(&self, name: &str) -> std::io::Result<()>;

    /// The object `name` to read, or `None` when there is none.
    ///
    /// # Errors
    /// The destination's own, other than the object not being there.
    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ReadAt>>>;

    /// What is at `name` now, for [`Destination::publish_if`]. Destinations without
    /// conditional writes keep the default, [`Seen::Unknown`].
    ///
    /// # Errors
    /// The destination's own, other than the object not being there.
    fn seen(&self, name: &str) -> std::io::Result<Seen> {
        let _ = name;
        Ok(Seen::Unknown)
    }

    /// Publishes `object` at `name` only when what is there is still what `seen` says
    /// (a conditional write), and answers `false`, publishing nothing, when another writer
    /// changed it first. The default, for [`Seen::Unknown`] and destinations without
    /// conditional writes, publishes as [`Destination::publish`] does.
    ///
    /// # Errors
    /// The destination's own; nothing appears then.
    fn publish_if(&self, name: &str, object: Self::Object, seen: &Seen) -> std::io::Result<bool> {
        let _ = seen;
        self.publish(name, object).map(|()| true)
    }

    /// How the shard `name` is written. The default streams it into
    /// [`Destination::create`]'s object, hashed as it goes; a local directory gives a file
    /// written with positioned writes (blobs placed in parallel), hashed once written.
    ///
    /// # Errors
    /// As [`Destination::create`].
    fn shard(&self, name: &str, version: ztensor_format::Version) -> Result<Shard<Self::Object>> {
        let _ = version;
        self.create(name).map(Shard::Stream).map_err(|e| failed(self, "cannot write", name, e))
    }

    /// A write of a whole checkpoint failed after publishing `published`: takes them back,
    /// best effort (what cannot be removed is a shard no index names). A directory made
    /// [`Directory::all_or_nothing`] also removes the directories it made.
    fn abandon(&self, published: &[&str]) {
        for name in published {
            let _ = self.remove(name);
        }
    }

    /// A write of a whole checkpoint succeeded: what it made stays, whatever this destination
    /// is used for next. The default has nothing to let go of; a directory made
    /// [`Directory::all_or_nothing`] stops taking its files back.
    fn kept(&self) {}
}

/// How a shard goes to its [`Destination`] ([`Destination::shard`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Shard<O> {
    /// Streamed into an object, then published.
    Stream(O),
    /// A local file, published by its writer's [`FileWriter::finish`].
    File(Box<FileWriter>),
}

/// What was at a name of a [`Destination`] when it was looked at ([`Destination::seen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Seen {
    /// Nothing.
    Nothing,
    /// An object, by a tag the destination gives it (an ETag).
    Object(String),
    /// Not known: the destination has no conditional writes.
    Unknown,
}

/// What [`write_all`](crate::write_all) published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// Where the index went.
    pub index: String,
    /// The shards.
    pub shards: usize,
    /// Their bytes together.
    pub bytes: u64,
}

/// `e`, a failure doing `what` to the object `name` of `to`: a zTensor error a destination
/// passed through is kept as it is (its own message and path), any other names the object.
pub(crate) fn failed<D: Destination + ?Sized>(
    to: &D,
    what: &str,
    name: &str,
    e: std::io::Error,
) -> Error {
    match e.downcast::<ztensor_io::Error>() {
        Ok(inner) => Error::from(inner),
        Err(e) => Error::io(what, Path::new(&to.locate(name)), &e),
    }
}

/// A local directory as a [`Destination`]: made (with its parents) at the first write, each
/// file written beside its name and renamed into place, receipts in their folder. A link,
/// directory or special file planted at a name is refused, never written or read through.
#[derive(Debug)]
pub struct Directory {
    path: PathBuf,
    out: OnceLock<OutputDir>,
    /// What this write made, taken back on failure or interrupt ([`Directory::all_or_nothing`]);
    /// taken (run or kept) once the write ends.
    undo: Mutex<Option<Undo>>,
    /// Made [`Directory::all_or_nothing`]: what a write puts here is the undo's affair alone.
    whole: bool,
}

impl Directory {
    /// The directory at `path`, which need not exist yet.
    pub fn new(path: impl Into<PathBuf>) -> Directory {
        Directory { path: path.into(), out: OnceLock::new(), undo: Mutex::new(None), whole: false }
    }

    /// The same directory, and what a write puts there taken back when it fails
    /// ([`Destination::abandon`]) or the process is interrupted ([`interrupt`](crate::interrupt)):
    /// the files made at names nothing held before, and the directories made for them when
    /// nothing else was put there. Dropped, it keeps what was written.
    #[must_use]
    pub fn all_or_nothing(mut self) -> Directory {
        // The outermost directory the output makes, to be removed again if the write fails.
        let created = self
            .path
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
            .last()
            .map(Path::to_owned);
        *self.undo() = Some(Undo::register(self.path.clone(), created));
        self.whole = true;
        self
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn undo(&self) -> std::sync::MutexGuard<'_, Option<Undo>> {
        self.undo.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The directory, made when missing.
    fn made(&self) -> ztensor_io::Result<&OutputDir> {
        if let Some(out) = self.out.get() {
            return Ok(out);
        }
        let out = OutputDir::open(&self.path)?;
        Ok(self.out.get_or_init(|| out))
    }

    /// The directory holding `name` (its receipts folder for a receipt), made when missing,
    /// and the file name in it; the name recorded for taking back when nothing is there yet.
    fn place<'n>(&self, name: &'n str) -> ztensor_io::Result<(OutputDir, &'n str)> {
        let out = self.made()?;
        let (dir, file) = match name.split_once('/') {
            Some((sub, file)) => (out.subdir(sub)?, file),
            None => (out.clone(), name),
        };
        if let Some(undo) = self.undo().as_ref() {
            undo.adding(&dir, file, name)?;
        }
        Ok((dir, file))
    }

    /// The directory holding `name` when it is there, and the file name in it.
    fn existing<'n>(&self, name: &'n str) -> ztensor_io::Result<Option<(OutputDir, &'n str)>> {
        let out = match self.out.get() {
            Some(out) => out.clone(),
            None if std::fs::symlink_metadata(&self.path).is_err() => return Ok(None),
            // Opened once (its stale temporaries swept once), then held: every later read
            // goes through the same directory, whatever its path comes to name.
            None => {
                let opened = OutputDir::open_existing(&self.path)?;
                self.out.get_or_init(|| opened).clone()
            }
        };
        Ok(match name.split_once('/') {
            Some((sub, file)) => out.subdir_if_present(sub)?.map(|dir| (dir, file)),
            None => Some((out, name)),
        })
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        if let Some(undo) = self.undo().take() {
            undo.keep();
        }
    }
}

/// A zTensor error as an I/O error that [`failed`] turns back into it.
fn io(e: ztensor_io::Error) -> std::io::Error {
    std::io::Error::other(e)
}

impl Destination for Directory {
    type Object = ztensor_io::AtomicFile;

    fn locate(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    fn create(&self, name: &str) -> std::io::Result<ztensor_io::AtomicFile> {
        let (dir, file) = self.place(name).map_err(io)?;
        dir.create(file).map_err(io)
    }

    fn publish(&self, _name: &str, object: ztensor_io::AtomicFile) -> std::io::Result<()> {
        object.persist().map_err(io)
    }

    fn remove(&self, name: &str) -> std::io::Result<()> {
        match self.existing(name).map_err(io)? {
            Some((dir, file)) => dir.remove(file).map_err(io),
            None => Ok(()),
        }
    }

    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ReadAt>>> {
        let Some((dir, file)) = self.existing(name).map_err(io)? else { return Ok(None) };
        let Some(file) = dir.open_file(file).map_err(io)? else { return Ok(None) };
        Ok(Some(Box::new(FileSource::new(file)?)))
    }

    fn shard(&self, name: &str, version: ztensor_format::Version) -> Result<Shard<Self::Object>> {
        let (dir, file) = self.place(name)?;
        Ok(Shard::File(Box::new(FileWriter::create_in(&dir, file, version)?)))
    }

    fn abandon(&self, published: &[&str]) {
        // All or nothing: the undo knows what this write made (and not what was there
        // before); once it has run or been kept, nothing is left to take back.
        if self.whole {
            if let Some(undo) = self.undo().take() {
                undo.run();
            }
            return;
        }
        for name in published {
            let _ = self.remove(name);
        }
    }

    fn kept(&self) {
        if let Some(undo) = self.undo().take() {
            undo.keep();
        }
    }
}
