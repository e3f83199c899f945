//! Output directories whose entries the tool names itself: shards, receipts, indexes.
//!
//! A user names a directory; the tool then creates `model-00001-of-00002.zt`,
//! `.ztensor-receipts/unit-00000.json` and so on inside it. In a shared scratch directory
//! another user may plant a symbolic link at one of those names, aimed at a file of the user
//! running the tool. [`OutputDir`] holds the directory open and creates, replaces, reads and
//! removes its entries relative to that handle (`openat`, `renameat`, `unlinkat` with
//! `O_NOFOLLOW`), so no link inside it is followed and swapping a subdirectory for a link
//! mid-run changes nothing. A link found at a name the tool chose is refused with an error
//! naming it. The directory the user named is followed through links, as any path a user
//! gives is.
//!
//! Besides the map module and `writeback`, the only module with `unsafe`: the foreign calls
//! std does not offer, each on a descriptor this module owns and a NUL-terminated name.

use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::paths::is_any_temp;

/// Why a name the tool chose holds something it will not write through.
fn planted(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {kind}, and this name is one the tool chooses itself (planted there?)"),
    )
}

/// A directory held open, whose entries are created and replaced relative to the handle and
/// never through a symbolic link. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OutputDir {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

/// What a name in an output directory holds, not following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Missing,
    File,
    Dir,
    Link,
    Other,
}

impl EntryKind {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            EntryKind::Link => "a symbolic link",
            EntryKind::Dir => "a directory",
            EntryKind::Other => "a FIFO, device or socket",
            EntryKind::Missing | EntryKind::File => "a file",
        }
    }
}

/// A plain name: one path component, not `.` or `..`, no NUL.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    Ok(())
}

impl OutputDir {
    /// Opens the directory at `path`, creating it and its parents when missing. `path` is the
    /// user's: links along it are followed.
    ///
    /// # Errors
    /// I/O errors, and a path that is not a directory.
    pub fn open(path: impl AsRef<Path>) -> Result<OutputDir> {
        let path = path.as_ref();
        std::fs::create_dir_all(path)
            .map_err(|e| Error::io("cannot create the directory", Some(path.to_owned()), e))?;
        OutputDir::open_existing(path)
    }

    /// Opens the existing directory at `path` (followed through links).
    ///
    /// # Errors
    /// I/O errors, and a path that is not a directory.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<OutputDir> {
        let path = path.as_ref().to_owned();
        #[cfg(unix)]
        {
            let fd = sys::open_dir(&path)
                .map_err(|e| Error::io("cannot open the directory", Some(path.clone()), e))?;
            Ok(OutputDir { inner: Arc::new(Inner { path, fd }) }.swept())
        }
        #[cfg(not(unix))]
        {
            if !std::fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(false) {
                return Err(Error::io(
                    "cannot open the directory",
                    Some(path),
                    io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
                ));
            }
            Ok(OutputDir { inner: Arc::new(Inner { path }) }.swept())
        }
    }

    /// Removes the temporary files killed writers left here, once, so that the files created
    /// in the directory afterwards need not list it each.
    fn swept(self) -> OutputDir {
        sweep_dir(&self);
        self
    }

    /// The directory's path, as it was opened.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The path of entry `name`, for messages and for readers that open it afterwards.
    pub fn join(&self, name: &str) -> PathBuf {
        self.inner.path.join(name)
    }

    /// The subdirectory `name`, created when missing. A symbolic link there is refused.
    ///
    /// # Errors
    /// A link or a non-directory at `name`, and I/O errors.
    pub fn subdir(&self, name: &str) -> Result<OutputDir> {
        let path = self.join(name);
        let err = |what: &str, e| Error::io(what, Some(path.clone()), e);
        check_name(name).map_err(|e| err("cannot create", e))?;
        match self.kind(name)? {
            EntryKind::Missing => match self.mkdir(name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err("cannot create", e)),
            },
            EntryKind::Dir => {}
            other => return Err(err("refusing to use", planted(other.describe()))),
        }
        #[cfg(unix)]
        {
            let fd = sys::open_subdir(&self.inner.fd, name).map_err(|e| {
                if is_link_error(&e) {
                    err("refusing to use", planted("a symbolic link"))
                } else {
                    err("cannot open the directory", e)
                }
            })?;
            Ok(OutputDir { inner: Arc::new(Inner { path, fd }) }.swept())
        }
        #[cfg(not(unix))]
        {
            Ok(OutputDir { inner: Arc::new(Inner { path }) }.swept())
        }
    }

    /// The existing subdirectory `name`, or `None` when nothing is there. A symbolic link or
    /// anything but a directory there is refused.
    ///
    /// # Errors
    /// Such an entry, and I/O errors.
    pub fn subdir_if_present(&self, name: &str) -> Result<Option<OutputDir>> {
        match self.kind(name)? {
            EntryKind::Missing => Ok(None),
            _ => self.subdir(name).map(Some),
        }
    }

    /// Opens entry `name` for reading when it is a regular file: `Ok(None)` when nothing is
    /// there. A link or special file is refused without being opened through.
    ///
    /// # Errors
    /// Such an entry, and I/O errors.
    pub fn open_file(&self, name: &str) -> Result<Option<File>> {
        let path = self.join(name);
        let err = |what: &str, e| Error::io(what, Some(path.clone()), e);
        check_name(name).map_err(|e| err("cannot open", e))?;
        match self.kind(name)? {
            EntryKind::Missing => return Ok(None),
            EntryKind::File => {}
            other => return Err(err("refusing to read", planted(other.describe()))),
        }
        #[cfg(unix)]
        let file = sys::open_read(&self.inner.fd, name);
        #[cfg(not(unix))]
        let file = File::open(&path);
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if is_link_error(&e) => {
                return Err(err("refusing to read", planted("a symbolic link")));
            }
            Err(e) => return Err(err("cannot open", e)),
        };
        let meta = file.metadata().map_err(|e| err("cannot stat", e))?;
        if !meta.is_file() {
            return Err(err("refusing to read", planted("not a regular file")));
        }
        Ok(Some(file))
    }

    /// Reads entry `name` whole when it is a regular file of at most `cap` bytes (counted on
    /// the bytes read, not the size claimed): `Ok(None)` when nothing is there.
    ///
    /// # Errors
    /// As [`OutputDir::open_file`], and an entry longer than `cap`.
    pub fn read(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let Some(file) = self.open_file(name)? else { return Ok(None) };
        crate::input::read_capped(file, cap, &self.join(name)).map(Some)
    }

    /// Removes entry `name` (a file or link itself, never what a link names); nothing there is
    /// not an error.
    ///
    /// # Errors
    /// I/O errors.
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.join(name);
        check_name(name).map_err(|e| Error::io("cannot remove", Some(path.clone()), e))?;
        match self.unlink(name) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("cannot remove", Some(path), e)),
        }
    }

    /// What `name` holds, links not followed.
    pub(crate) fn kind(&self, name: &str) -> Result<EntryKind> {
        let path = self.join(name);
        check_name(name).map_err(|e| Error::io("cannot use", Some(path.clone()), e))?;
        #[cfg(unix)]
        let kind = sys::kind_at(&self.inner.fd, name);
        #[cfg(not(unix))]
        let kind = match std::fs::symlink_metadata(&path) {
            Ok(m) => Ok(kind_of(&m)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(EntryKind::Missing),
            Err(e) => Err(e),
        };
        kind.map_err(|e| Error::io("cannot stat", Some(path), e))
    }

    /// The metadata of `name` when it is a regular file, links not followed.
    pub(crate) fn file_metadata(&self, name: &str) -> Result<Option<Metadata>> {
        match self.open_file(name)? {
            Some(f) => f
                .metadata()
                .map(Some)
                .map_err(|e| Error::io("cannot stat", Some(self.join(name)), e)),
            None => Ok(None),
        }
    }

    fn mkdir(&self, name: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            sys::mkdir_at(&self.inner.fd, name)
        }
        #[cfg(not(unix))]
        {
            std::fs::create_dir(self.join(name))
        }
    }

    /// Creates `name` new (never through a link), for reading and writing.
    pub(crate) fn create_new(&self, name: &str, mode: u32) -> io::Result<File> {
        check_name(name)?;
        #[cfg(unix)]
        {
            sys::create_new(&self.inner.fd, name, mode)
        }
        #[cfg(not(unix))]
        {
            let _ = mode;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(self.join(name))
        }
    }

    /// Renames entry `from` over entry `to`, both in this directory.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        #[cfg(unix)]
        {
            sys::rename_at(&self.inner.fd, from, to)
        }
        #[cfg(not(unix))]
        {
            std::fs::rename(self.join(from), self.join(to))
        }
    }

    pub(crate) fn unlink(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        #[cfg(unix)]
        {
            sys::unlink_at(&self.inner.fd, name)
        }
        #[cfg(not(unix))]
        {
            std::fs::remove_file(self.join(name))
        }
    }

    /// Makes the directory's entries durable.
    pub(crate) fn sync(&self) -> io::Result<()> {
        #[cfg(unix)]
        {
            match sys::sync(&self.inner.fd) {
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
                other => other,
            }
        }
        #[cfg(not(unix))]
        {
            Ok(())
        }
    }
}

#[cfg(not(unix))]
fn kind_of(m: &Metadata) -> EntryKind {
    let t = m.file_type();
    if t.is_symlink() {
        EntryKind::Link
    } else if t.is_dir() {
        EntryKind::Dir
    } else if t.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

/// Whether an open with `O_NOFOLLOW` failed because the name is a link (`ELOOP`; `ENOTDIR`
/// with `O_DIRECTORY` on a link to a file).
fn is_link_error(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(OsStr::new(name).as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a file name"))
}

#[cfg(unix)]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Path;

    use super::{EntryKind, c_name};

    fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
    }

    /// Opens `name` relative to `dir` with `flags` and `mode`, owning the result.
    fn open_at(dir: &OwnedFd, name: &str, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
        let name = c_name(name)?;
        let flags = flags | libc::O_CLOEXEC;
        loop {
            // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an open
            // descriptor borrowed for the call; the mode is passed as the variadic argument
            // `openat` reads only with O_CREAT.
            let fd = unsafe {
                libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint)
            };
            match cvt(fd) {
                // SAFETY: `openat` returned a fresh descriptor that nothing else owns.
                Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub(super) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt;
        let file =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).open(path)?;
        Ok(file.into())
    }

    pub(super) fn open_subdir(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
        open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)
    }

    /// Opens a file for reading without following a link and without waiting on a FIFO.
    pub(super) fn open_read(dir: &OwnedFd, name: &str) -> io::Result<File> {
        // O_NONBLOCK has no effect on a regular file's reads; the caller refuses anything else.
        let fd = open_at(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)?;
        Ok(File::from(fd))
    }

    pub(super) fn create_new(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<File> {
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        open_at(dir, name, flags, mode).map(File::from)
    }

    pub(super) fn mkdir_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a NUL-terminated name that outlives the call and an open descriptor.
        cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) }).map(drop)
    }

    pub(super) fn rename_at(dir: &OwnedFd, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = dir.as_raw_fd();
        // SAFETY: NUL-terminated names that outlive the call and an open descriptor.
        cvt(unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) }).map(drop)
    }

    pub(super) fn unlink_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a NUL-terminated name that outlives the call and an open descriptor.
        cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }).map(drop)
    }

    pub(super) fn sync(dir: &OwnedFd) -> io::Result<()> {
        // SAFETY: an open descriptor; `fsync` touches no memory of ours.
        cvt(unsafe { libc::fsync(dir.as_raw_fd()) }).map(drop)
    }

    pub(super) fn kind_at(dir: &OwnedFd, name: &str) -> io::Result<EntryKind> {
        let c = c_name(name)?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a NUL-terminated name that outlives the call, an open descriptor, and room
        // for one `stat` that the call fills when it succeeds.
        let r = unsafe {
            libc::fstatat(dir.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW)
        };
        match cvt(r) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(EntryKind::Missing),
            Err(e) => return Err(e),
        }
        // SAFETY: `fstatat` succeeded, so it filled the whole struct.
        let mode = unsafe { st.assume_init() }.st_mode & libc::S_IFMT;
        Ok(match mode {
            libc::S_IFREG => EntryKind::File,
            libc::S_IFDIR => EntryKind::Dir,
            libc::S_IFLNK => EntryKind::Link,
            _ => EntryKind::Other,
        })
    }
}

/// Removes every temporary file in `dir` that nobody is writing (left by killed processes),
/// whatever its target: done once when an [`OutputDir`] is opened, so the files created in it
/// afterwards need not list the directory each.
fn sweep_dir(dir: &OutputDir) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.path()) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| is_any_temp(n)) else { continue };
        // Opened through the handle, never through a link, never a FIFO.
        let Ok(Some(file)) = dir.open_file(name) else { continue };
        if file.try_lock().is_ok() && dir.unlink(name).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[cfg(unix)]
    #[test]
    fn planted_links_are_refused_and_their_targets_untouched() {
        let d = ztensor_testkit::scratch("io-dir-links");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = OutputDir::open(d.join("out")).unwrap();
        std::os::unix::fs::symlink(&victim, out.join("shard.zt")).unwrap();
        let err = out.create("shard.zt").unwrap_err().to_string();
        assert!(err.contains("symbolic link") && err.contains("shard.zt"), "{err}");
        assert!(out.read("shard.zt", 100).unwrap_err().to_string().contains("symbolic link"));
        // A link in place of a subdirectory the tool names.
        let elsewhere = d.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join(".receipts")).unwrap();
        assert!(out.subdir(".receipts").unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // Removing the entry removes the link, not the file it names.
        out.remove("shard.zt").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn files_are_written_replaced_and_read_within_the_directory() {
        let d = ztensor_testkit::scratch("io-dir-files");
        let out = OutputDir::open(d.join("a/b")).unwrap();
        let sub = out.subdir("r").unwrap();
        for text in [&b"one"[..], b"two!"] {
            let mut f = sub.create("x.json").unwrap();
            f.write_all(text).unwrap();
            f.persist().unwrap();
            assert_eq!(sub.read("x.json", 10).unwrap().unwrap(), text);
            assert_eq!(std::fs::read(d.join("a/b/r/x.json")).unwrap(), text);
        }
        // Only the file: no temporaries left beside it.
        assert_eq!(std::fs::read_dir(sub.path()).unwrap().count(), 1);
        assert!(sub.read("x.json", 3).unwrap_err().to_string().contains("over"));
        assert!(sub.read("missing", 3).unwrap().is_none());
        assert!(out.create("../x").is_err());
    }
}
