//! Reading `fixtures/index.toml`.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

/// One entry of the index.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The file, relative to `fixtures/`.
    pub file: String,
    /// `0.1`, `1.1`, `1.2` or `tensorbuffers`.
    pub version: String,
    /// What the file covers.
    pub covers: String,
    /// `ok`, or the identifier of the rule the file must be rejected with.
    pub expect: String,
}

#[derive(Deserialize)]
struct Index {
    fixture: Vec<Entry>,
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
