//! `-` as an output: the file is written whole into a private directory first, then copied to
//! standard output.
//!
//! Every writer places blobs at offsets it plans (and the parallel engine writes them out of
//! order), and a file is only handed on once it is complete and verified as written: a pipe
//! cannot be seeked, and a reader downstream must never see half a file. So the output is made
//! exactly as for a named file, in a directory of this run's own (fresh, mode 0700, an
//! unpredictable name in `TMPDIR`), and copied to standard output once it is published there.
//! The directory is removed on every exit the process sees (success, error, SIGINT, SIGTERM,
//! SIGHUP), and after a SIGKILL by the next run that stages one. Standard output that is a terminal is refused: the bytes would only garble it.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, bail};

/// How messages name standard output.
pub const STDOUT: &str = "<stdout>";

/// The staging directory while it exists, for the signal handler to remove.
static STAGING: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The staged file's path, once made: messages the libraries wrote with it name it [`STDOUT`]
/// instead ([`unstaged`]).
static STAGED: OnceLock<PathBuf> = OnceLock::new();

/// Whether `output` asks for standard output.
pub fn is_stdout(output: &Path) -> bool {
    output.as_os_str() == "-"
}

/// An output being written for standard output; removed (with its directory) when dropped.
#[derive(Debug)]
pub struct Staged {
    dir: super::stdin::PrivateDir,
    path: PathBuf,
}

impl Staged {
    /// A place to write a file named `name` for standard output. Refused when standard output
    /// is a terminal.
    ///
    /// # Errors
    ///
    /// Standard output is a terminal, or the private directory cannot be made.
    pub fn new(name: &str) -> Result<Staged> {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            bail!(
                "`-` writes the file to standard output, which is a terminal: redirect it to a \
                 file or pipe it into a program"
            );
        }
        let dir = super::stdin::private_dir("ztensor-stdout-").with_context(|| {
            format!(
                "cannot make a directory for standard output in {}",
                std::env::temp_dir().display()
            )
        })?;
        ztensor_io::on_interrupt("the staged standard output", || {
            remove();
            Vec::new()
        });
        if let Ok(mut staging) = STAGING.lock() {
            *staging = Some(dir.path().to_path_buf());
        }
        let path = dir.path().join(name);
        let _ = STAGED.set(path.clone());
        Ok(Staged { dir, path })
    }

    /// Where the writer writes the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies the finished file to standard output (flushed), returning its length; the file
    /// and its directory are removed.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or standard output cannot be written.
    pub fn deliver(self) -> Result<u64> {
        let mut file = std::fs::File::open(&self.path)
            .with_context(|| format!("cannot read back what was written for {STDOUT}"))?;
        let mut stdout = std::io::stdout().lock();
        let copied = std::io::copy(&mut file, &mut stdout)?;
        std::io::Write::flush(&mut stdout)?;
        Ok(copied)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // The directory goes as `dir` drops, next.
        let _ = &self.dir;
        if let Ok(mut staging) = STAGING.lock() {
            staging.take();
        }
    }
}

/// Removes the staging directory, if any (from [`ztensor_io::interrupt`], before the process
/// exits).
fn remove() {
    if let Ok(mut staging) = STAGING.lock()
        && let Some(dir) = staging.take()
    {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `message` with the staged file's path (as written, and as escaped for the terminal)
/// replaced by [`STDOUT`].
pub fn unstaged(message: &str) -> Cow<'_, str> {
    super::stdin::renamed(message, STAGED.get().map(PathBuf::as_path), STDOUT)
}
