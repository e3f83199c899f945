//! Paths and files as the writers and readers of this crate name them: a file's identity,
//! links followed, the sidecar names beside a target (temporaries, the append journal), and
//! positional reads.

use std::ffi::OsStr;
use std::fs::{self, File, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The longest file name most file systems allow (NAME_MAX).
pub(crate) const NAME_MAX: usize = 255;
/// Room kept after a sidecar's stem: `.{pid}-{counter}.ztmp` or `.zt-journal`.
pub(crate) const SUFFIX_ROOM: usize = 40;
pub(crate) const TEMP_EXTENSION: &str = "ztmp";

/// The stem that names `target`'s sidecar files (temporaries, the append journal): the name
/// itself when it leaves room for a suffix within NAME_MAX, otherwise a prefix of it and a
/// digest of the whole name, so that distinct targets keep distinct sidecars.
pub(crate) fn sidecar_stem(name: &OsStr) -> String {
    let lossy = name.to_string_lossy();
    if 1 + lossy.len() + SUFFIX_ROOM <= NAME_MAX && lossy == name.to_str().unwrap_or_default() {
        return lossy.into_owned();
    }
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(name.as_encoded_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    };
    let mut keep = NAME_MAX - 1 - SUFFIX_ROOM - 17;
    while !lossy.is_char_boundary(keep.min(lossy.len())) {
        keep -= 1;
    }
    format!("{}~{}", &lossy[..keep.min(lossy.len())], &digest[..16])
}

pub(crate) fn dir_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The sidecar file `.{stem}.{tag}` beside `target`.
pub(crate) fn sidecar(target: &Path, tag: &str) -> PathBuf {
    let stem = sidecar_stem(target.file_name().unwrap_or(OsStr::new("out")));
    dir_of(target).join(format!(".{stem}.{tag}"))
}

/// Follows symbolic links from `path` to the file they name (which need not exist yet).
///
/// # Errors
/// A loop of links, and I/O errors other than the final file not existing.
pub(crate) fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_owned();
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&current)
                    .map_err(|e| Error::io("cannot read the link", Some(current.clone()), e))?;
                current = if to.is_absolute() { to } else { dir_of(&current).join(to) };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(Error::io("cannot stat", Some(current), e)),
        }
    }
    Err(Error::io(
        "too many levels of symbolic links at",
        Some(path.to_owned()),
        io::Error::other("symbolic link loop"),
    ))
}

/// Makes `path`'s directory entry durable. File systems that cannot sync a directory have
/// nothing to make durable this way.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        match File::open(dir_of(path)).and_then(|d| d.sync_all()) {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
            other => other,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Checks that `target` (followed through symbolic links) can be replaced by a written file:
/// it is a regular file or does not exist yet. A directory, FIFO, device or socket is refused,
/// so a command can refuse it before doing any work.
///
/// # Errors
/// Such a target, and I/O errors.
pub fn check_output(target: impl AsRef<Path>) -> Result<()> {
    check_target(&resolve_links(target.as_ref())?).map(drop)
}

/// What an existing target is, refused unless it is a regular file.
pub(crate) fn check_target(target: &Path) -> Result<Option<Metadata>> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot stat", Some(target.to_owned()), e)),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(Some(meta));
    }
    let what = crate::input::describe(kind);
    Err(Error::io(
        "refusing to replace",
        Some(target.to_owned()),
        io::Error::new(io::ErrorKind::InvalidInput, format!("it is {what}")),
    ))
}

/// Whether `name` is a temporary file of a target whose sidecar stem is `stem`.
pub(crate) fn is_temp_of(name: &str, stem: &str) -> bool {
    let Some(rest) = name.strip_prefix('.').and_then(|r| r.strip_prefix(stem)) else {
        return false;
    };
    let Some(middle) =
        rest.strip_prefix('.').and_then(|r| r.strip_suffix(&format!(".{TEMP_EXTENSION}")))
    else {
        return false;
    };
    let mut parts = middle.split('-');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_none()
}

/// Whether `name` is a temporary file of any target.
pub(crate) fn is_any_temp(name: &str) -> bool {
    let Some(rest) =
        name.strip_prefix('.').and_then(|r| r.strip_suffix(&format!(".{TEMP_EXTENSION}")))
    else {
        return false;
    };
    rest.rsplit_once('.').is_some_and(|(stem, tail)| {
        !stem.is_empty() && is_temp_of(&format!(".{stem}.{tail}.{TEMP_EXTENSION}"), stem)
    })
}

/// A file's identity on its device, stable across renames and whatever path or link names
/// it (device and inode on Unix): how outputs are told apart from inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileId {
    /// The identity of the file at `path` (links followed), `None` when nothing is there.
    ///
    /// # Errors
    /// I/O errors other than the file not existing.
    pub fn of_path(path: impl AsRef<Path>) -> Result<Option<FileId>> {
        match std::fs::metadata(path.as_ref()) {
            Ok(m) => Ok(Some(FileId::of(&m))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot stat", Some(path.as_ref().to_owned()), e)),
        }
    }

    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> FileId {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileId { dev: meta.dev(), ino: meta.ino() }
        }
        #[cfg(not(unix))]
        {
            // No inode numbers here: the creation time is the best identity there is (not the
            // length, which an append changes).
            let created = meta
                .created()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            FileId { dev: created, ino: 0 }
        }
    }
}

/// Fills `buf` from `file` at `offset` with positional reads.
pub(crate) fn pread_exact(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_read(
                file,
                &mut buf[done..],
                offset + done as u64,
            )?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}
