//! `-` as an input: standard input copied to a temporary file first, so that every reader (all
//! of which seek: manifests and indexes lie at the end, tensors anywhere) reads it as a file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

/// The spool of this process, for the signal handler to remove.
static SPOOL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Standard input, spooled; the file is removed when this is dropped (or on a signal).
#[derive(Debug)]
pub struct Spooled {
    path: PathBuf,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Ok(mut spool) = SPOOL.lock() {
            spool.take();
        }
    }
}

/// Replaces `path` by a spool of standard input when it is `-`, the spool being kept in
/// `spool`. Standard input can be read once: a second `-` is a usage error, and so is a
/// terminal (nothing was piped in).
pub fn resolve(path: &mut PathBuf, spool: &mut Option<Spooled>) -> Result<()> {
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
    let (mut file, spooled) = create(&std::env::temp_dir())?;
    // Registered (and owned) before a byte is copied, so neither an error nor a signal leaves
    // it behind.
    let spooled = Spooled { path: spooled };
    if let Ok(mut spool) = SPOOL.lock() {
        *spool = Some(spooled.path.clone());
    }
    std::io::copy(&mut stdin.lock(), &mut file)
        .with_context(|| format!("copying standard input to {}", spooled.path.display()))?;
    path.clone_from(&spooled.path);
    *spool = Some(spooled);
    Ok(())
}

/// A new file of its own in `dir`, readable by this user only. Created exclusively, so a name
/// someone planted (a link, a FIFO) is never opened: the next name is tried.
fn create(dir: &Path) -> Result<(std::fs::File, PathBuf)> {
    for n in 0..100 {
        let path = dir.join(format!("ztensor-stdin-{}-{n}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot spool standard input into {}", dir.display())
                });
            }
        }
    }
    bail!("cannot spool standard input: every name tried in {} is taken", dir.display())
}

/// Removes the spool, if any (from the signal handler, before the process exits).
pub fn remove() {
    if let Ok(mut spool) = SPOOL.lock()
        && let Some(path) = spool.take()
    {
        let _ = std::fs::remove_file(path);
    }
}
