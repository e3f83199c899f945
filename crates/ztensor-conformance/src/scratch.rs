//! Private scratch directories: created fresh under the system's temporary directory with a
//! name nobody can guess (so nothing another user planted there is ever written through), mode
//! 0700, never reused, and removed when done, or by [`remove_all`] when a signal ends the
//! program first.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context as _, Result};

/// The scratch directories alive in this process, for [`remove_all`].
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A private directory, removed with everything in it when dropped (unless [`Scratch::keep`]
/// hands it over).
#[derive(Debug)]
pub struct Scratch {
    dir: Option<tempfile::TempDir>,
}

impl Scratch {
    /// A new directory `ztensor-<what>-<random>` under the temporary directory, mode 0700.
    /// Creation fails rather than reuse anything that exists under that name.
    ///
    /// # Errors
    /// When no directory can be created there.
    pub fn new(what: &str) -> Result<Scratch> {
        let base = std::env::temp_dir();
        let dir = tempfile::Builder::new()
            .prefix(&format!("ztensor-{what}-"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&base)
            .with_context(|| format!("creating a private directory under {}", base.display()))?;
        live().push(dir.path().to_owned());
        Ok(Scratch { dir: Some(dir) })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), tempfile::TempDir::path)
    }

    /// Keeps the directory (it is no longer removed, nor by [`remove_all`]) and returns it.
    pub fn keep(mut self) -> PathBuf {
        let dir = self.dir.take().map(tempfile::TempDir::keep).unwrap_or_default();
        live().retain(|p| *p != dir);
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            live().retain(|p| p != dir.path());
            let _ = dir.close();
        }
    }
}

/// Removes every scratch directory of this process that is still there: for a signal handler,
/// before the program exits without running destructors.
pub fn remove_all() {
    for dir in std::mem::take(&mut *live()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_is_private_fresh_and_removed() {
        let a = Scratch::new("test").unwrap();
        let b = Scratch::new("test").unwrap();
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let name = a.path().file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with("ztensor-test-"), "{name}");
        assert_ne!(name, format!("ztensor-test-{}", std::process::id()));
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let (pa, pb) = (a.path().to_owned(), b.path().to_owned());
        drop(a);
        assert!(!pa.exists());
        let kept = b.keep();
        assert_eq!(kept, pb);
        assert!(kept.exists());
        assert!(!live().contains(&kept));
        std::fs::remove_dir_all(kept).unwrap();
    }
}
