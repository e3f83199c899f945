//! `-` as an input: standard input copied to a temporary file first, so that every reader (all
//! of which seek: manifests and indexes lie at the end, tensors anywhere) reads it as a file.
//!
//! The copy (the spool) lives alone in a directory of its own, made fresh for the run with an
//! unpredictable name and mode 0700 in the temporary directory (`TMPDIR`), so nobody else can
//! put a file beside it or read it. It holds at most `--max-input` bytes (by default the
//! machine's physical memory, see [`default_max`]), and is removed with its directory on every
//! exit the process sees: success, error, SIGINT, SIGTERM, SIGHUP. A SIGKILL leaves the
//! directory behind (`ztensor-stdin-XXXXXX`, readable by this user only) until the next run
//! that spools: the directory holds a lock the killed run no longer holds, by which that run
//! knows it for an orphan and removes it ([`private_dir`]).
//!
//! The spool stays linked while it is read: readers reopen inputs by path (to detect their
//! format, take a read lock, look for an append's journal beside them), which an unlinked file
//! reached through `/proc/self/fd` would serve on Linux only, and under a name that is no file.
//!
//! Messages name it `<stdin>` ([`STDIN`], [`unspooled`]), never the temporary path.

use std::borrow::Cow;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, bail};

/// How messages name standard input.
pub const STDIN: &str = "<stdin>";

/// The spool's directory while it exists, for the signal handler to remove.
static SPOOL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The spool's path, once made (standard input is read once per process): messages printed
/// after it is removed still name it [`STDIN`].
static SPOOLED: OnceLock<PathBuf> = OnceLock::new();

/// Standard input, spooled; the file and its directory are removed when this is dropped (or on
/// a signal).
#[derive(Debug)]
pub struct Spooled {
    dir: PrivateDir,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        // The directory (and the spool in it) is removed as `dir` drops, next.
        if let Ok(mut spool) = SPOOL.lock() {
            spool.take();
        }
    }
}

/// The most bytes standard input may hold when `--max-input` is not given: the machine's
/// physical memory (at least 1 GiB; 16 GiB where the platform does not say). The temporary
/// directory is often in memory (tmpfs), where a larger spool could not fit, and a checkpoint
/// larger than memory piped in is rare enough to ask for the flag.
pub fn default_max() -> u64 {
    ztensor_io::physical_memory().unwrap_or(16 << 30).max(1 << 30)
}

/// Replaces `path` by a spool of standard input when it is `-`, the spool being kept in
/// `spool`; standard input longer than `max` bytes is refused. Standard input can be read
/// once: a second `-` is a usage error, and so is a terminal (nothing was piped in). A zTensor
/// 2 root listing shards is refused: its shards would be looked for beside the spool, where
/// they are not.
pub fn resolve(path: &mut PathBuf, spool: &mut Option<Spooled>, max: u64) -> Result<()> {
    if path.as_os_str() != "-" {
        return Ok(());
    }
    if spool.is_some() {
        bail!("standard input (`-`) can be read once: give it as one input only");
    }
    let stdin = std::io::stdin();
    if std::io::IsTerminal::is_terminal(&stdin) {
        bail!("`-` reads standard input, which is a terminal: pipe or redirect a file into it");
    }
    let temp = std::env::temp_dir();
    let dir = private_dir("ztensor-stdin-")
        .with_context(|| format!("cannot spool standard input into {}", temp.display()))?;
    // Registered (and owned) before a byte is copied, so neither an error nor a signal leaves
    // it behind.
    ztensor_io::on_interrupt("the spool of standard input", || {
        remove();
        Vec::new()
    });
    if let Ok(mut spool) = SPOOL.lock() {
        *spool = Some(dir.path().to_path_buf());
    }
    let spooled = Spooled { dir };
    let file_path = spooled.dir.path().join("stdin");
    let _ = SPOOLED.set(file_path.clone());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&file_path)
        .with_context(|| format!("cannot spool standard input into {}", temp.display()))?;
    // The stream is judged by its first bytes before the rest is spooled: one that starts
    // like no format is refused at once, not after reading it to its end (it may not have
    // one: `/dev/zero`).
    let mut input = stdin.lock();
    let mut head = Vec::with_capacity(ztensor_registry::HEAD_LEN);
    (&mut input)
        .take(ztensor_registry::HEAD_LEN as u64)
        .read_to_end(&mut head)
        .with_context(|| "cannot read standard input".to_owned())?;
    ztensor_registry::detect_head(&head, "<stdin>").map_err(|e| crate::errors::reported("", &e))?;
    file.write_all(&head)
        .with_context(|| format!("cannot copy standard input to {}", temp.display()))?;
    // One byte past the cap tells a longer input from one of exactly `max` bytes.
    let rest = max.saturating_add(1).saturating_sub(head.len() as u64);
    let copied = head.len() as u64
        + std::io::copy(&mut input.take(rest), &mut file)
            .with_context(|| format!("cannot copy standard input to {}", temp.display()))?;
    if copied > max {
        bail!(
            "standard input is longer than --max-input allows ({max} bytes): give a larger \
             --max-input SIZE (e.g. 64GB), or the file's path instead of `-`"
        );
    }
    drop(file);
    refuse_shards(&file_path)?;
    path.clone_from(&file_path);
    *spool = Some(spooled);
    Ok(())
}

/// A directory of this run's own in the temporary directory (`TMPDIR`): made fresh, with an
/// unpredictable name after `prefix` and mode 0700, so nobody else can read it or put a file
/// in it; removed with its contents when the value drops.
///
/// It holds a lock file (`.owner`, an exclusive `flock` kept for the run), which the kernel
/// releases however the run ends, SIGKILL included: a later run with the same `prefix` that
/// finds such a directory of this user's whose lock nobody holds removes it
/// ([`sweep`]). Directories of other users, or without the lock file, are left alone.
pub(crate) fn private_dir(prefix: &str) -> std::io::Result<PrivateDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = builder.tempdir_in(std::env::temp_dir())?;
    // Locked under a name no sweep looks at, then renamed: the lock belongs to the open file,
    // so no sweep ever finds `.owner` unlocked while this run lives.
    let fresh = dir.path().join(".owner.new");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let lock = options.open(&fresh)?;
    // A file system without locks leaves the directory for SIGKILL to orphan, as before.
    let locked = lock.try_lock().is_ok();
    std::fs::rename(&fresh, dir.path().join(OWNER))?;
    if locked {
        sweep(prefix, dir.path());
    }
    Ok(PrivateDir { dir, _lock: lock })
}

/// The lock file of a [`private_dir`].
const OWNER: &str = ".owner";

/// A [`private_dir`]: the directory and the lock that marks it in use.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl PrivateDir {
    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the directories `prefix…` in the temporary directory that earlier runs killed with
/// no chance to clean up left behind: owned by the same user as `mine` (this run's own), mode
/// 0700, holding a lock file `.owner` that nobody holds locked.
fn sweep(prefix: &str, mine: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let Ok(own) = std::fs::symlink_metadata(mine) else { return };
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let named = entry.file_name().to_str().is_some_and(|n| n.starts_with(prefix));
            if !named || path == mine {
                continue;
            }
            let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| {
                m.file_type().is_dir()
                    && m.uid() == own.uid()
                    && m.permissions().mode() & 0o777 == 0o700
            });
            let owner = path.join(OWNER);
            if !ours || !std::fs::symlink_metadata(&owner).is_ok_and(|m| m.file_type().is_file()) {
                continue;
            }
            let Ok(lock) = std::fs::File::open(&owner) else { continue };
            if lock.try_lock().is_ok() {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (prefix, mine);
}

/// Refuses a zTensor 2 root that lists shards: they are files beside the root, and standard
/// input has no place beside it. (Beside the spool, in its private directory, nothing could be
/// found anyway; this says why instead.) A file that does not open as zTensor 2 is left for
/// its reader to report.
fn refuse_shards(spool: &Path) -> Result<()> {
    let Ok(mut told) = ztensor_registry::Detected::new(spool) else { return Ok(()) };
    if told.kind() != super::Kind::Zt2 {
        return Ok(());
    }
    let options =
        ztensor_registry::OpenOptions { options: crate::options(false), ..Default::default() };
    let Ok(file) = told.open_zt2(&options) else { return Ok(()) };
    let shards = file.manifest().map_or(0, |m| m.shards.len());
    if shards > 0 {
        bail!(
            "{STDIN}: this is the root of a sharded zTensor 2 model ({}); its shards are files \
             found beside the root, which standard input has none of, so they are not looked \
             up: give the root's path instead of `-`",
            super::text::plural(shards, "shard")
        );
    }
    Ok(())
}

/// Whether `path` is the spool of standard input.
pub fn is_spool(path: &Path) -> bool {
    SPOOLED.get().is_some_and(|s| s == path)
}

/// `path` as messages show it: [`STDIN`] for the spool, else escaped for the terminal.
pub fn shown(path: &Path) -> Cow<'static, str> {
    if is_spool(path) {
        Cow::Borrowed(STDIN)
    } else {
        Cow::Owned(super::text::shown(&path.display().to_string()).into_owned())
    }
}

/// `path` as JSON names it: [`STDIN`] for the spool, else as written.
pub fn name(path: &Path) -> String {
    if is_spool(path) { STDIN.to_owned() } else { path.display().to_string() }
}

/// `message` with the spool's path (as written, and as escaped for the terminal) replaced by
/// [`STDIN`]: for errors, whose text the libraries wrote with the path they were given.
pub fn unspooled(message: &str) -> Cow<'_, str> {
    renamed(message, SPOOLED.get().map(PathBuf::as_path), STDIN)
}

/// `message` with `path` (as written, and as escaped for the terminal) replaced by `name`:
/// how a temporary file standing for a stream is kept out of what users read.
pub(crate) fn renamed<'m>(message: &'m str, path: Option<&Path>, name: &str) -> Cow<'m, str> {
    let Some(path) = path else { return Cow::Borrowed(message) };
    let raw = path.display().to_string();
    let escaped = super::text::shown(&raw).into_owned();
    if !message.contains(&raw) && !message.contains(&escaped) {
        return Cow::Borrowed(message);
    }
    Cow::Owned(message.replace(&raw, name).replace(&escaped, name))
}

/// Removes the spool and its directory, if any (from [`ztensor_io::interrupt`], before the
/// process exits).
fn remove() {
    if let Ok(mut spool) = SPOOL.lock()
        && let Some(dir) = spool.take()
    {
        let _ = std::fs::remove_dir_all(dir);
    }
}
