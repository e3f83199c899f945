//! Advisory locks between the processes that write a file and those that read it.
//!
//! One writer at a time: an append, and a rewrite that replaces a file it read, hold an
//! exclusive `flock` on the target for their whole run; a writer that replaces a file without
//! reading it takes the lock only around the rename. Readers take a shared lock only while they
//! read the manifest, so an append never waits long for them; a reader that finds an append
//! running reads the file as it was before the append (the length its journal records, see
//! [`crate::journal`]) instead of waiting for it.
//!
//! `flock` locks belong to an open file, not to a process, so a second lock taken by the same
//! process on another descriptor would wait for the first forever. A process-wide table of the
//! files this process holds makes a second [`WriteLock`] share the first, and lets this process's
//! own readers of a file it is writing see what its writer has made consistent.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, Weak};

use crate::error::{Error, Result};
use crate::paths::FileId;

/// What a held write lock is doing, as far as readers in this process need to know.
#[derive(Debug, Default)]
struct Holding {
    /// Whether an appender of this process holds the file.
    appender: bool,
    /// While an append is writing past the old end: that end (the last complete state).
    appending_from: Option<u64>,
}

#[derive(Debug)]
struct Held {
    /// Kept open for the lock: closing it releases the flock.
    _file: File,
    id: FileId,
    path: PathBuf,
    state: Mutex<Holding>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut table = table();
        if table.get(&self.id).is_some_and(|w| w.strong_count() == 0) {
            table.remove(&self.id);
        }
        // Closing `file` releases the flock.
    }
}

fn table() -> MutexGuard<'static, HashMap<FileId, Weak<Held>>> {
    static TABLE: LazyLock<Mutex<HashMap<FileId, Weak<Held>>>> = LazyLock::new(Mutex::default);
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `file` supports locking: file systems without `flock` answer "unsupported", and then
/// there is no lock to honour.
pub(crate) fn unsupported(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::Unsupported {
        return true;
    }
    // Linux's numbers for ENOSYS, ENOLCK and EOPNOTSUPP; elsewhere the kind must say so.
    cfg!(target_os = "linux") && matches!(e.raw_os_error(), Some(38 | 37 | 95))
}

/// `try_lock`, retried for up to a tenth of a second while it would block: readers hold the
/// shared lock only for a moment, and a writer asked not to wait should not fail on one.
fn try_lock_briefly(file: &File) -> Result<(), std::fs::TryLockError> {
    for _ in 0..20 {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
    file.try_lock()
}

/// The exclusive write lock on an existing file, held until dropped.
///
/// Taken by the zTensor appender and rewriter (`ztensor_io::append`, `ztensor_io::rewrite`) and the rename of every
/// [`AtomicFile`](crate::AtomicFile) over an existing file; take one yourself around a
/// read-modify-write of a file (reading it, then replacing it) so that no append slips in
/// between. A second lock on the same file by the same process shares the first.
#[derive(Debug, Clone)]
pub struct WriteLock {
    held: Arc<Held>,
}

impl WriteLock {
    /// Locks the file at `path` (following symbolic links), waiting while another process
    /// writes it. `Ok(None)` when there is no file there (nothing to lock).
    ///
    /// # Errors
    /// I/O errors opening the file.
    pub fn acquire(path: impl AsRef<Path>) -> Result<Option<WriteLock>> {
        WriteLock::take(path.as_ref(), true)
    }

    /// As [`WriteLock::acquire`], but fails at once with [`ErrorKind::Busy`](crate::ErrorKind::Busy)
    /// when another process is writing the file.
    ///
    /// # Errors
    /// As [`WriteLock::acquire`], and `Busy`.
    pub fn try_acquire(path: impl AsRef<Path>) -> Result<Option<WriteLock>> {
        WriteLock::take(path.as_ref(), false)
    }

    /// The path of the locked file (symbolic links resolved).
    pub fn path(&self) -> &Path {
        &self.held.path
    }

    /// The identity (device and inode) of the locked file.
    pub fn id(&self) -> FileId {
        self.held.id
    }

    fn take(path: &Path, wait: bool) -> Result<Option<WriteLock>> {
        let path = crate::paths::resolve_links(path)?;
        let io = |what: &'static str| {
            let path = path.clone();
            move |e| Error::io(what, Some(path), e)
        };
        loop {
            // Refused before opening: opening a FIFO waits for a writer to appear.
            if crate::paths::check_target(&path)?.is_none() {
                return Ok(None);
            }
            let file = match OpenOptions::new().read(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io("cannot open")(e)),
            };
            let id = FileId::of(&file.metadata().map_err(io("cannot stat"))?);
            // The table's guard ends with this statement: dropping a last `Arc` below takes
            // the table again.
            let shared = table().get(&id).and_then(Weak::upgrade);
            if let Some(held) = shared {
                return Ok(Some(WriteLock { held }));
            }
            match try_lock_briefly(&file) {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) if !wait => {
                    return Err(Error::busy(path));
                }
                Err(std::fs::TryLockError::WouldBlock) => match file.lock() {
                    Ok(()) => {}
                    Err(e) if unsupported(&e) => {}
                    Err(e) => return Err(io("cannot lock")(e)),
                },
                Err(std::fs::TryLockError::Error(e)) if unsupported(&e) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(io("cannot lock")(e)),
            }
            // The path may have been given to another file (renamed over) while we waited: the
            // lock must be on the file the path names now.
            match std::fs::metadata(&path) {
                Ok(m) if FileId::of(&m) == id => {}
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io("cannot stat")(e)),
            }
            let mut table = table();
            // Another thread of this process may have locked it meanwhile through another
            // descriptor; flock let us both in only if one of us has since let go.
            if let Some(held) = table.get(&id).and_then(Weak::upgrade) {
                return Ok(Some(WriteLock { held }));
            }
            let held =
                Arc::new(Held { _file: file, id, path, state: Mutex::new(Holding::default()) });
            table.insert(id, Arc::downgrade(&held));
            return Ok(Some(WriteLock { held }));
        }
    }

    /// Claims the file for an appender of this process: false when one already has it.
    pub fn claim_append(&self) -> bool {
        let mut state = self.held.state.lock().unwrap_or_else(PoisonError::into_inner);
        !std::mem::replace(&mut state.appender, true)
    }

    /// Whether an appender of this process holds the file.
    pub fn appender_active(&self) -> bool {
        self.held.state.lock().unwrap_or_else(PoisonError::into_inner).appender
    }

    /// Gives up the claim of [`WriteLock::claim_append`].
    pub fn release_append(&self) {
        let mut state = self.held.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.appender = false;
    }

    /// Records that an append is writing past `old_end` (`Some`) or has finished (`None`), for
    /// this process's readers of the same file.
    pub fn set_appending(&self, old_end: Option<u64>) {
        self.held.state.lock().unwrap_or_else(PoisonError::into_inner).appending_from = old_end;
    }
}

/// Whether `a` and `b` name the same existing file (links followed).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => FileId::of(&a) == FileId::of(&b),
        _ => false,
    }
}

/// How long a reader waits for a writer that holds a file without a journal before it reads
/// the file without the lock. Writers hold a file that way only for moments (the rename of a
/// replacement, the start of an append); a lock held longer is someone else's, and a reader
/// is never held hostage by it.
pub const READER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Files opened since the last call whose lock was held past [`READER_PATIENCE`] by a process
/// that was not appending (no journal): they were read without waiting for it. A program
/// says so to its user (the `ztensor` tool prints a note; the Python package warns).
pub fn read_without_lock() -> Vec<PathBuf> {
    std::mem::take(&mut *UNLOCKED.lock().unwrap_or_else(PoisonError::into_inner))
}

static UNLOCKED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Opens `path` for reading and works out how much of it a reader may trust (see
/// [`FileSource::open`](crate::FileSource::open)): the file's length when no append is
/// unfinished, otherwise the length before that append. Waits, for at most
/// [`READER_PATIENCE`], while a writer of this or another process holds the file without a
/// journal saying where its last complete state ends; then reads it as it stands.
pub(crate) fn open_for_reading(path: &Path) -> Result<(File, u64)> {
    let file = crate::input::open_input(path)?;
    committed_end(file, path)
}

/// As [`open_for_reading`], for `file`, already opened (by [`open_input`](crate::input::open_input))
/// from `path`.
pub(crate) fn committed_end(file: File, path: &Path) -> Result<(File, u64)> {
    let io = |what: &'static str| {
        let path = path.to_owned();
        move |e| Error::io(what, Some(path), e)
    };
    let deadline = std::time::Instant::now() + READER_PATIENCE;
    let len = |file: &File| file.metadata().map(|m| m.len()).map_err(io("cannot stat"));
    let id = FileId::of(&file.metadata().map_err(io("cannot stat"))?);
    let journal = crate::journal::Journal::path_for(path)?;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        let shared = table().get(&id).and_then(Weak::upgrade);
        if let Some(held) = shared {
            // This process writes the file: while its appender runs, that knows the state;
            // otherwise a matching journal is one a killed append left.
            let appending =
                held.state.lock().unwrap_or_else(PoisonError::into_inner).appending_from;
            let end = match appending {
                Some(end) => end,
                None => match crate::journal::Journal::read_matching(&journal, id, &file)? {
                    Some(j) => j.old_len,
                    None => len(&file)?,
                },
            };
            return Ok((file, end));
        }
        let locked = match file.try_lock_shared() {
            Ok(()) => true,
            Err(std::fs::TryLockError::WouldBlock) => false,
            Err(std::fs::TryLockError::Error(e)) if unsupported(&e) => true,
            Err(std::fs::TryLockError::Error(e)) => return Err(io("cannot lock")(e)),
        };
        // Locked: no writer runs, but one may have been killed mid-append, leaving its journal.
        // Not locked: a writer runs; while it appends, its journal says where the old end is.
        let pending = crate::journal::Journal::read_matching(&journal, id, &file)?;
        if locked {
            let end = match pending {
                Some(j) => Ok(j.old_len),
                None => len(&file),
            };
            let _ = file.unlock();
            return Ok((file, end?));
        }
        if let Some(j) = pending {
            return Ok((file, j.old_len));
        }
        // A writer holds the file without a journal: it is about to append, has just finished,
        // or replaces the file by a rename. Any of these is over soon or ends in a new file.
        // A lock held longer is not a writer's (anyone who can read a file can lock it): the
        // file is read as it stands, which is what it is while nobody appends.
        if std::time::Instant::now() >= deadline {
            UNLOCKED.lock().unwrap_or_else(PoisonError::into_inner).push(path.to_owned());
            let end = len(&file)?;
            return Ok((file, end));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}
