//! Scratch directories for tests: unique, removed when dropped, kept for a look when the test
//! failed and `ZTENSOR_KEEP_SCRATCH` is set.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Set (to anything) to keep the scratch directories of failing tests; each kept one is
/// named on standard error.
pub const KEEP_VAR: &str = "ZTENSOR_KEEP_SCRATCH";

/// A fresh directory `ztensor-<what>-<random>` under the system's temporary directory,
/// removed with everything in it when dropped, unless the thread is panicking (a failed
/// assertion) and [`KEEP_VAR`] is set.
///
/// It stands for its path (`Deref<Target = Path>`), so `dir.join(..)` and `&dir` where a
/// `&Path` goes read as they did when the helpers returned a `PathBuf`. Keep the value alive
/// for as long as the directory is used: `scratch("x").join("y")` removes it at once.
#[derive(Debug)]
pub struct Scratch {
    dir: Option<tempfile::TempDir>,
}

/// A new [`Scratch`] directory, its name starting `ztensor-<what>-`.
///
/// # Panics
/// When no directory can be made under the temporary directory: the test cannot run.
#[must_use]
pub fn scratch(what: &str) -> Scratch {
    Scratch::new(what)
}

impl Scratch {
    /// A new directory, its name starting `ztensor-<what>-`.
    ///
    /// # Panics
    /// When no directory can be made under the temporary directory.
    #[must_use]
    pub fn new(what: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("ztensor-{what}-"))
            .tempdir()
            .unwrap_or_else(|e| panic!("a scratch directory for {what}: {e}"));
        Scratch { dir: Some(dir) }
    }

    /// Where it is.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), tempfile::TempDir::path)
    }

    /// Keeps the directory (it is no longer removed) and returns where it is.
    #[must_use]
    pub fn keep(mut self) -> PathBuf {
        self.dir.take().map(tempfile::TempDir::keep).unwrap_or_default()
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.path().as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        if keeps(std::thread::panicking(), std::env::var_os(KEEP_VAR).is_some()) {
            eprintln!("kept the failed test's scratch directory {}", dir.keep().display());
        } else {
            let _ = dir.close();
        }
    }
}

/// Whether a directory stays: only a failed test's, and only when asked.
fn keeps(panicking: bool, asked: bool) -> bool {
    panicking && asked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_is_fresh_and_removed() {
        let a = scratch("testkit");
        let b = scratch("testkit");
        assert_ne!(a.path(), b.path());
        assert!(a.is_dir() && b.is_dir());
        let name = a.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with("ztensor-testkit-"), "{name}");
        std::fs::write(a.join("f"), b"x").unwrap();
        let (pa, pb) = (a.to_path_buf(), b.to_path_buf());
        drop(a);
        assert!(!pa.exists());
        let kept = b.keep();
        assert_eq!(kept, pb);
        assert!(kept.exists());
        std::fs::remove_dir_all(kept).unwrap();
    }

    #[test]
    fn only_a_failed_test_asked_to_keep_keeps() {
        assert!(keeps(true, true));
        assert!(!keeps(true, false) && !keeps(false, true) && !keeps(false, false));
    }

    #[test]
    fn a_failed_test_removes_its_directory_unless_asked() {
        if std::env::var_os(KEEP_VAR).is_some() {
            return;
        }
        let dir = scratch("testkit-panic");
        let path = dir.to_path_buf();
        let failed = std::thread::spawn(move || {
            let _dir = dir;
            panic!("a failing test");
        })
        .join();
        assert!(failed.is_err());
        assert!(!path.exists(), "{}", path.display());
    }
}
