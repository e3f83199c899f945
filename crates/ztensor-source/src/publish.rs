//! Publishing files: a temporary file beside the target, renamed over it when complete.
//!
//! Whatever happens to the writer, the target is its old self or the new file, never a part of
//! one. The temporary file is named after its target, holds a lock while it is written, and is
//! removed when the writer fails, is dropped, or (through [`interrupt`]) when the process is
//! told to stop; one left by a killed process or a power loss is recognised by its name and its
//! missing lock, and removed by the next write to the same target. The target path is followed
//! through symbolic links (the link is kept, the file it names is replaced), special files are
//! refused before any work, and a replaced file's permission bits and owner are kept.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError, Weak};

use crate::dir::{EntryKind, OutputDir};
use crate::error::{Error, Result};
use crate::lock::WriteLock;
use crate::paths::{
    FileId, TEMP_EXTENSION, check_target, dir_of, is_temp_of, resolve_links, sidecar, sidecar_stem,
    sync_dir,
};

/// Gives `file` the permission bits and, where this process may, the owner of `like`.
fn keep_mode_and_owner(file: &File, like: &Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // Owner first: changing it clears set-user-ID bits, which the mode then restores.
        if std::os::unix::fs::fchown(file, Some(like.uid()), Some(like.gid())).is_err() {
            // Not allowed to give the file away; a group we belong to may still be kept.
            let _ = std::os::unix::fs::fchown(file, None, Some(like.gid()));
        }
    }
    file.set_permissions(like.permissions())
}

// ---------------------------------------------------------------------------------------------
// What this process is writing, for `interrupt`.

/// Work that can be abandoned from another thread: its writes fail afterwards.
pub trait Abandon: Send + Sync {
    /// Stops the work: its writes fail from now on, and what it changed is rolled back.
    fn abandon(&self);
}

#[derive(Default)]
struct Live {
    temps: HashMap<u64, PathBuf>,
    work: HashMap<u64, Weak<dyn Abandon>>,
}

static LIVE: LazyLock<Mutex<Live>> = LazyLock::new(Mutex::default);
/// Set by [`interrupt`]: no new temporary file or append starts after it.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn interrupted_error(path: &Path) -> Error {
    Error::io(
        "not writing",
        Some(path.to_owned()),
        io::Error::new(io::ErrorKind::Interrupted, "the process was told to stop"),
    )
}
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers work for [`interrupt`]; `None` once the process was told to stop.
pub fn register_work(work: Weak<dyn Abandon>) -> Option<u64> {
    let mut live = live();
    if INTERRUPTED.load(Ordering::SeqCst) {
        return None;
    }
    let id = COUNTER.fetch_add(1, Ordering::Relaxed);
    live.work.insert(id, work);
    Some(id)
}

/// Forgets work [`register_work`] registered, once it ended.
pub fn unregister_work(id: u64) {
    live().work.remove(&id);
}

/// What a layer above this crate undoes when the process is told to stop (the shards of a
/// sharded output, multipart uploads, a spooled standard input): run by [`interrupt`] after
/// this crate's own undoing, returning what it could not undo (for a message).
pub type Undo = fn() -> Vec<String>;

/// The layers' undoing, by name, in the order they were added.
static UNDO: Mutex<Vec<(&'static str, Undo)>> = Mutex::new(Vec::new());

/// Adds a layer's `undo` to what [`interrupt`] runs: once per `name`, however often it is
/// called, so a layer calls this as each of its writes begins (before anything it would
/// undo exists). The one registry every writer of the process undoes through, so a signal
/// handler has one call to make.
pub fn on_interrupt(name: &'static str, undo: Undo) {
    let mut hooks = UNDO.lock().unwrap_or_else(PoisonError::into_inner);
    if !hooks.iter().any(|(n, _)| *n == name) {
        hooks.push((name, undo));
    }
}

/// Stops this process's writing, for a signal handler about to exit: every append in progress
/// is rolled back (its file truncated to its old length, its journal removed), every temporary
/// file is removed, and writes through them fail from then on; then each layer added with
/// [`on_interrupt`] undoes its own, in the order they were added. Targets are left as they
/// were. Returns what could not be undone (an object whose upload could not be aborted, …).
///
/// A library installs no signal handlers; a program that wants Ctrl-C to leave nothing behind
/// calls this from its handler (the `ztensor` tool does, then exits with 128 + the signal).
pub fn interrupt() -> Vec<String> {
    let (temps, work) = {
        let live = live();
        // Under the table's lock: whatever registers after this sees the flag and stops.
        INTERRUPTED.store(true, Ordering::SeqCst);
        (
            live.temps.values().cloned().collect::<Vec<_>>(),
            live.work.values().filter_map(Weak::upgrade).collect::<Vec<_>>(),
        )
    };
    for w in work {
        w.abandon();
    }
    for t in temps {
        let _ = fs::remove_file(t);
    }
    let hooks = UNDO.lock().unwrap_or_else(PoisonError::into_inner).clone();
    hooks.into_iter().flat_map(|(_, undo)| undo()).collect()
}

// ---------------------------------------------------------------------------------------------
// Temporary files.

/// Where an [`AtomicFile`]'s temporary file and target live: beside a path the user gave
/// (followed through links), or in an [`OutputDir`] under a name the tool chose.
#[derive(Debug)]
enum Place {
    Path,
    At { dir: OutputDir, name: String },
}

/// A fresh temporary file beside `target`, created and locked, its path registered for
/// [`interrupt`]. Returns the file, its path and its registration.
fn create_temp(target: &Path, place: &Place, mode: u32) -> Result<(File, PathBuf, u64)> {
    let stem = sidecar_stem(target.file_name().unwrap_or(OsStr::new("out")));
    let dir = dir_of(target);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp_name = format!(".{stem}.{}-{n}.{TEMP_EXTENSION}", std::process::id());
        let temp = dir.join(&temp_name);
        // Registered before it exists, so a signal can never leave it behind unregistered.
        {
            let mut live = live();
            if INTERRUPTED.load(Ordering::SeqCst) {
                return Err(interrupted_error(&temp));
            }
            live.temps.insert(n, temp.clone());
        }
        let opened = match place {
            Place::Path => {
                let mut options = OpenOptions::new();
                options.read(true).write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
                options.open(&temp)
            }
            Place::At { dir, .. } => dir.create_new(&temp_name, mode),
        };
        #[cfg(not(unix))]
        let _ = mode;
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                live().temps.remove(&n);
                if e.kind() == io::ErrorKind::AlreadyExists {
                    continue;
                }
                // Named by the user's path, not the temporary file's; a missing directory is
                // named as what is missing, not as the file.
                if e.kind() == io::ErrorKind::NotFound && fs::metadata(dir).is_err() {
                    let missing = format!("the directory {} does not exist", dir.display());
                    let e = io::Error::new(io::ErrorKind::NotFound, missing);
                    return Err(Error::io(format!("cannot write {}", target.display()), None, e));
                }
                return Err(Error::io("cannot write", Some(target.to_owned()), e));
            }
        };
        let remove = || match place {
            Place::Path => drop(fs::remove_file(&temp)),
            Place::At { dir, .. } => drop(dir.unlink(&temp_name)),
        };
        // The lock tells a sweeper that someone is writing this file. Between creating and
        // locking it a sweeper may have taken it for a leftover; then start again.
        let locked = match file.try_lock() {
            Ok(()) => true,
            Err(fs::TryLockError::WouldBlock) => false,
            // Without locks there is nothing to hold; sweepers cannot take it either.
            Err(fs::TryLockError::Error(e)) if crate::lock::unsupported(&e) => true,
            Err(fs::TryLockError::Error(e)) => {
                remove();
                live().temps.remove(&n);
                return Err(Error::io(
                    "cannot lock the file being written for",
                    Some(target.to_owned()),
                    e,
                ));
            }
        };
        let now = match place {
            Place::Path => fs::metadata(&temp).ok(),
            Place::At { dir, .. } => dir.file_metadata(&temp_name).ok().flatten(),
        };
        let ours = locked
            && match (file.metadata(), now) {
                (Ok(a), Some(b)) => FileId::of(&a) == FileId::of(&b),
                _ => false,
            };
        if ours {
            return Ok((file, temp, n));
        }
        live().temps.remove(&n);
    }
}

fn forget_temp(n: u64) {
    live().temps.remove(&n);
}

/// Removes temporary files of `target` that nobody is writing: left by a process that was
/// killed or lost power. A live writer holds its temporary file's lock, so it is never taken.
/// Returns how many were removed.
pub fn remove_stale_temporaries(target: impl AsRef<Path>) -> Result<usize> {
    let target = resolve_links(target.as_ref())?;
    let stem = sidecar_stem(target.file_name().unwrap_or(OsStr::new("out")));
    let dir = dir_of(&target);
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("cannot list", Some(dir.to_owned()), e)),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| is_temp_of(n, &stem)) {
            continue;
        }
        // Only regular files are opened: opening a FIFO would wait for a writer.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = OpenOptions::new().read(true).open(&path) else { continue };
        if file.metadata().map(|m| m.is_file()).unwrap_or(false)
            && file.try_lock().is_ok()
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// A file being written beside its target, renamed over it on [`AtomicFile::persist`] and
/// removed if dropped unpersisted (on error or panic), or by [`interrupt`].
///
/// The target is followed through symbolic links; a directory, FIFO, device or socket there is
/// refused at creation; an existing file's permission bits and owner (where this process may
/// set it) carry over to the new one. The rename waits while another process appends to the
/// target (see [`WriteLock`]).
#[derive(Debug)]
pub struct AtomicFile {
    file: Option<BufWriter<File>>,
    /// Bytes skipped past ([`AtomicFile::skip`]) since the last write: the position moves over
    /// them only when the next bytes go in, so skipping costs no system call.
    hole: u64,
    temp: PathBuf,
    target: PathBuf,
    registration: u64,
    place: Place,
}

impl AtomicFile {
    /// Creates a fresh temporary file beside `target`, first removing temporary files of the
    /// same target that a killed process left behind.
    ///
    /// # Errors
    /// A target that is not a regular file, and I/O errors.
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile> {
        let target = resolve_links(target.as_ref())?;
        let existing = check_target(&target)?;
        remove_stale_temporaries(&target)?;
        AtomicFile::start(target, existing, Place::Path)
    }

    /// Starts writing entry `name` of `dir` (see [`OutputDir::create`]).
    pub(crate) fn create_in(dir: &OutputDir, name: &str) -> Result<AtomicFile> {
        let target = dir.join(name);
        let existing = match dir.kind(name)? {
            EntryKind::Missing => None,
            EntryKind::File => dir.file_metadata(name)?,
            other => {
                return Err(Error::io(
                    "refusing to write",
                    Some(target),
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "it is {}, and this name is one the tool chooses itself (planted there?)",
                            other.describe()
                        ),
                    ),
                ));
            }
        };
        AtomicFile::start(target, existing, Place::At { dir: dir.clone(), name: name.to_owned() })
    }

    fn start(target: PathBuf, existing: Option<Metadata>, place: Place) -> Result<AtomicFile> {
        // A replaced file's contents stay as private as the file was while the new ones are
        // written; its own mode is applied before any byte goes in.
        let mode = if existing.is_some() { 0o600 } else { 0o666 };
        let (file, temp, registration) = create_temp(&target, &place, mode)?;
        let mut this = AtomicFile { file: None, hole: 0, temp, target, registration, place };
        if let Some(meta) = &existing
            && let Err(e) = keep_mode_and_owner(&file, meta)
        {
            // Dropping `this` removes the temporary file.
            return Err(Error::io("cannot keep the permissions of", Some(this.target.clone()), e));
        }
        this.file = Some(BufWriter::with_capacity(1 << 20, file));
        Ok(this)
    }

    /// The path the file will be published at (symbolic links resolved).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, syncs and renames the file over its target, then syncs the directory.
    ///
    /// # Errors
    /// I/O errors, and [`ErrorKind::Busy`](crate::ErrorKind::Busy) when an appender of this
    /// process holds the target. The target is then untouched, except after a failed sync of
    /// the directory, which comes after the rename.
    pub fn persist(mut self) -> Result<()> {
        let io = |what: &'static str, path: &Path| {
            let path = path.to_owned();
            move |e| Error::io(what, Some(path), e)
        };
        let file = match self.file.take() {
            Some(writer) => writer
                .into_inner()
                .map_err(|e| Error::io("writing", Some(self.target.clone()), e.into_error()))?,
            None => return Err(Error::io("publishing", Some(self.target.clone()), abandoned())),
        };
        if self.hole > 0 {
            // Skipped bytes at the very end that no positioned write filled: the file still
            // reaches past them, as zeros.
            let end = (&file).stream_position().map_err(io("writing", &self.target))? + self.hole;
            if file.metadata().map_err(io("writing", &self.target))?.len() < end {
                file.set_len(end).map_err(io("writing", &self.target))?;
            }
        }
        file.sync_all().map_err(io("syncing", &self.target))?;
        crate::pause::point(crate::pause::at::PUBLISH_SYNCED);
        // Not over a file another process is appending to: wait for it to finish. An append of
        // this process shares the lock, so it is refused rather than orphaned.
        if let Place::At { dir, name } = &self.place {
            // Checked again: what was a file (or nothing) at creation may be a link now, and
            // the lock below would open what it names.
            let kind = dir.kind(name)?;
            if !matches!(kind, EntryKind::Missing | EntryKind::File) {
                return Err(Error::io(
                    "refusing to replace",
                    Some(self.target.clone()),
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("it became {} while it was written", kind.describe()),
                    ),
                ));
            }
        }
        let lock = WriteLock::acquire(&self.target)?;
        if lock.as_ref().is_some_and(WriteLock::appender_active) {
            return Err(Error::busy(self.target.clone()));
        }
        match &self.place {
            Place::Path => fs::rename(&self.temp, &self.target),
            Place::At { dir, name } => dir.rename(&temp_name(&self.temp), name),
        }
        .map_err(io("publishing", &self.target))?;
        forget_temp(self.registration);
        self.temp = PathBuf::new();
        crate::pause::point(crate::pause::at::PUBLISH_RENAMED);
        match &self.place {
            Place::Path => sync_dir(&self.target),
            Place::At { dir, .. } => dir.sync(),
        }
        .map_err(io("syncing the directory of", &self.target))?;
        if let Some(lock) = lock {
            // A journal of the replaced file (left by an append that was killed) is moot.
            let journal = sidecar(&self.target, "zt-journal");
            if crate::journal::Journal::read_matching_id(&journal, lock.id()) {
                let _ = crate::journal::remove(&journal);
            }
        }
        drop(file);
        Ok(())
    }
}

/// The file name of a temporary file's path (always a plain name this module made).
fn temp_name(temp: &Path) -> String {
    temp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn abandoned() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "the write was interrupted")
}

impl AtomicFile {
    /// A second handle on the temporary file, for positioned writes from other threads (the
    /// zTensor writer's blob slots).
    ///
    /// # Errors
    /// The write was abandoned; the handle cannot be duplicated.
    pub fn positioned_handle(&self) -> io::Result<File> {
        self.file.as_ref().ok_or_else(abandoned)?.get_ref().try_clone()
    }

    /// Moves past `n` bytes that positioned writes fill (or that stay zero: the file is new).
    /// No system call: the position moves when the next bytes are written.
    ///
    /// # Errors
    /// A hole past 2^63 bytes.
    pub fn skip(&mut self, n: u64) -> io::Result<()> {
        self.hole = self
            .hole
            .checked_add(n)
            .filter(|&h| i64::try_from(h).is_ok())
            .ok_or_else(|| io::Error::other("a hole past 2^63 bytes"))?;
        Ok(())
    }

    /// The temporary file itself, what was buffered written out first, for writers that seek,
    /// read back or cut what they wrote (the zTensor 2 writer, which shares identical blobs).
    /// What is written through it goes straight to the file, at its position.
    ///
    /// # Errors
    /// Flushing the buffer, moving past skipped bytes.
    pub fn file_mut(&mut self) -> io::Result<&mut File> {
        let file = self.positioned()?;
        file.flush()?;
        Ok(file.get_mut())
    }

    /// The buffered file, positioned after any bytes skipped.
    fn positioned(&mut self) -> io::Result<&mut BufWriter<File>> {
        let file = self.file.as_mut().ok_or_else(abandoned)?;
        if self.hole > 0 {
            // `skip` keeps the hole within i64.
            let n = i64::try_from(self.hole).map_err(io::Error::other)?;
            file.seek(SeekFrom::Current(n))?;
            self.hole = 0;
        }
        Ok(file)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.positioned()?.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.positioned()?.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().ok_or_else(abandoned)?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            drop(self.file.take());
            match &self.place {
                Place::Path => drop(fs::remove_file(&self.temp)),
                Place::At { dir, .. } => drop(dir.unlink(&temp_name(&self.temp))),
            }
            forget_temp(self.registration);
        }
    }
}

impl OutputDir {
    /// Starts writing entry `name`, published in its place by
    /// [`AtomicFile::persist`](crate::AtomicFile::persist). A symbolic link, directory, FIFO,
    /// device or socket at `name` is refused; an existing file is replaced (its mode and owner
    /// kept), the entry itself and never what a link names.
    ///
    /// # Errors
    /// Such an entry, and I/O errors.
    pub fn create(&self, name: &str) -> Result<crate::AtomicFile> {
        crate::publish::AtomicFile::create_in(self, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::{NAME_MAX, SUFFIX_ROOM};

    #[test]
    fn sidecar_names_fit_name_max_and_stay_distinct() {
        let short = sidecar_stem(OsStr::new("model.zt"));
        assert_eq!(short, "model.zt");
        let a = "a".repeat(250);
        let b = format!("{}b", "a".repeat(249));
        let (sa, sb) = (sidecar_stem(OsStr::new(&a)), sidecar_stem(OsStr::new(&b)));
        assert_ne!(sa, sb);
        for s in [&sa, &sb] {
            assert!(1 + s.len() + SUFFIX_ROOM <= NAME_MAX, "{}", s.len());
        }
        // A multi-byte character at the cut is not split.
        let wide = "é".repeat(200);
        assert!(sidecar_stem(OsStr::new(&wide)).starts_with('é'));
    }

    #[test]
    fn bytes_skipped_last_still_count_as_zeros() {
        let d = ztensor_testkit::scratch("io-hole");
        let target = d.join("t.bin");
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"head").unwrap();
        f.skip(3).unwrap();
        f.write_all(b"mid").unwrap();
        f.skip(5).unwrap();
        f.persist().unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"head\0\0\0mid\0\0\0\0\0");
        // A hole past what a file offset can say is refused when skipped, not when written.
        let mut f = AtomicFile::create(&target).unwrap();
        f.skip(1 << 62).unwrap();
        assert!(f.skip(1 << 62).is_err());
        drop(f);
    }

    #[test]
    fn only_our_temporary_names_are_recognised() {
        assert!(is_temp_of(".m.zt.123-4.ztmp", "m.zt"));
        for other in [
            "m.zt",
            ".m.zt.ztmp",
            ".m.zt.12-.ztmp",
            ".m.zt.a-1.ztmp",
            ".m.zt.1-2-3.ztmp",
            ".m.zt.1-2.tmp",
            ".n.zt.1-2.ztmp",
            ".m.zt.x.1-2.ztmp",
        ] {
            assert!(!is_temp_of(other, "m.zt"), "{other}");
        }
    }
}
