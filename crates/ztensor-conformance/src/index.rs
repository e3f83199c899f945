//! Reading `fixtures/index.toml`.

use std::path::Path;

use anyhow::{Context, Result};
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
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    fixture: Vec<Entry>,
}

/// Reads one index file (entries' paths relative to the fixtures root).
///
/// # Errors
/// I/O and TOML errors.
pub fn read_file(path: &Path) -> Result<Vec<Entry>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let index: Index = toml::from_str(&text).with_context(|| path.display().to_string())?;
    Ok(index.fixture)
}

/// Reads the index under `fixtures_root` and, when present, the index of the frozen files of
/// other producers (`producers/index.toml`) and that of the reference's zTensor 2 corpus
/// (`external/ztensor2/index.toml`), whose paths are relative to `fixtures_root` too.
///
/// # Errors
/// I/O and TOML errors.
pub fn read_all(fixtures_root: &Path) -> Result<Vec<Entry>> {
    let mut entries = read(fixtures_root)?;
    for extra in ["producers/index.toml", "external/ztensor2/index.toml"] {
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
/// I/O and TOML errors.
pub fn read(fixtures_root: &Path) -> Result<Vec<Entry>> {
    let path = fixtures_root.join("index.toml");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let index: Index = toml::from_str(&text).with_context(|| path.display().to_string())?;
    Ok(index.fixture)
}
