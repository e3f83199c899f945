//! TensorBuffers files in every command.

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_registry::Place;
use ztensor_tensorbuffers::TbFile;

/// Opens a TensorBuffers file or object (through the format registry): the outer error is
/// I/O, the inner one a broken rule.
pub fn open(
    path: &Path,
    strict: bool,
) -> Result<Result<TbFile<Place>, ztensor_tensorbuffers::Error>> {
    let options = ztensor_registry::OpenOptions {
        options: ztensor_cli::options(strict),
        ..Default::default()
    };
    crate::told::told(path)?
        .open_tb(&options)
        .with_context(|| format!("cannot open {}", path.display()))
}
