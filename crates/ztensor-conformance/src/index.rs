//! Reading `fixtures/index.toml`.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// One entry of the index.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The file, relative to `fixtures/`.
    pub file: String,
    /// `0.1`, `1.1`, `1.2`, `2` or `tensorbuffers`.
    pub version: String,
    /// What the file covers.
    pub covers: String,
    /// `ok`, the identifier of the rule the file must be rejected with, or
    /// `implementation-defined`.
    pub expect: String,
    /// For implementation-defined files: the rule a strict reader rejects them with, if any.
    #[serde(default)]
    pub strict: Option<String>,
    /// For files another implementation wrote: which (`ztensor 1.2.3`, …).
    #[serde(default)]
    pub producer: Option<String>,
    /// For frozen files: the SHA-256 of their bytes, which must never change.
    #[serde(default)]
    pub sha256: Option<String>,
}

impl Entry {
    /// Whether the specs let readers accept or reject this file.
    pub fn implementation_defined(&self) -> bool {
        self.expect == "implementation-defined"
    }

    /// The fixture's path under `fixtures_root`, refused when it leaves it: see [`resolve`].
    ///
    /// # Errors
    /// As [`resolve`].
    pub fn path(&self, fixtures_root: &Path) -> Result<PathBuf> {
        resolve(fixtures_root, &self.file)
    }
}

/// Refuses a path of an index that could name a file outside the fixtures root: one that is
/// absolute, or has a `..` component (or is empty). An index is input: a runner given
/// `--fixtures DIR` must not be led to run an implementation on, or read a golden dump from,
/// anything else.
fn check_relative(file: &str) -> Result<()> {
    let path = Path::new(file);
    if file.is_empty() {
        bail!("fixture \"\": an empty path");
    }
    for component in path.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                bail!("fixture {file:?}: a path with `..`, which may leave the fixtures directory")
            }
            Component::RootDir | Component::Prefix(_) => {
                bail!(
                    "fixture {file:?}: an absolute path; paths are relative to the fixtures directory"
                )
            }
        }
    }
    Ok(())
}

/// `file` (a path of an index, or of a golden dump beside one) under `fixtures_root`: relative,
/// without `..`, and, where it exists, still inside `fixtures_root` once links are resolved.
///
/// # Errors
/// A path that is absolute, has a `..` component, or resolves (through a link) outside
/// `fixtures_root`; each error names the path.
pub fn resolve(fixtures_root: &Path, file: &str) -> Result<PathBuf> {
    check_relative(file)?;
    let path = fixtures_root.join(file);
    // A file that is missing is the runner's to report; one that is there must be inside.
    if let Ok(real) = path.canonicalize() {
        let root = fixtures_root
            .canonicalize()
            .with_context(|| format!("fixtures directory {}", fixtures_root.display()))?;
        if !real.starts_with(&root) {
            bail!(
                "fixture {file:?}: resolves to {}, outside the fixtures directory {}",
                real.display(),
                root.display()
            );
        }
    }
    Ok(path)
}

/// Checks every entry's path (see [`check_relative`]), naming the index it came from.
fn checked(entries: Vec<Entry>, index: &Path) -> Result<Vec<Entry>> {
    for e in &entries {
        check_relative(&e.file).with_context(|| index.display().to_string())?;
    }
    Ok(entries)
}

include!("indexes.rs");

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    fixture: Vec<Entry>,
}

/// Reads one index file (entries' paths relative to the fixtures root).
///
/// # Errors
/// I/O and TOML errors, and an entry whose path is absolute or has a `..` component.
pub fn read_file(path: &Path) -> Result<Vec<Entry>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let index: Index = toml::from_str(&text).with_context(|| path.display().to_string())?;
    checked(index.fixture, path)
}

/// Reads the indexes under `fixtures_root` ([`INDEXES`]): `index.toml` and, when present, the
/// index of the frozen files of other producers (`producers/index.toml`) and that of the
/// reference's zTensor 2 corpus (`external/ztensor2/index.toml`).
///
/// # Errors
/// I/O and TOML errors, and an entry whose path is absolute or has a `..` component.
pub fn read_all(fixtures_root: &Path) -> Result<Vec<Entry>> {
    let mut entries = read(fixtures_root)?;
    for extra in &INDEXES[1..] {
        let path = fixtures_root.join(extra);
        if path.exists() {
            entries.extend(read_file(&path)?);
        }
    }
    Ok(entries)
}

/// Reads the index under `fixtures_root`.
///
/// # Errors
/// I/O and TOML errors, and an entry whose path is absolute or has a `..` component.
pub fn read(fixtures_root: &Path) -> Result<Vec<Entry>> {
    read_file(&fixtures_root.join(INDEXES[0]))
}
